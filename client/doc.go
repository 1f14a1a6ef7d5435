// Package client is the Go SDK for ASMP servers: it drives runs of remote
// workflows over HTTP, or of Go-defined workflows in-process, through one
// interface, Backend.
//
// # Quick start
//
//	c, err := client.New("http://127.0.0.1:8000", nil)
//	if err != nil { … }
//	run, err := c.StartRun(ctx, "config-wizard-v1", nil)
//	cli, err := c.CLI(ctx, run.RunID)            // prompt, hint, options
//	action, input, err := client.Resolve(cli, run.Frame, "1")
//	next, err := c.Transition(ctx, run.RunID, action, input, nil)
//
// The loop of every ASMP client is: read the frame, read its CLI object,
// show it, let the user (or agent) pick, transition, and read the CLI object
// again for the new state. Resolve turns what a user typed into an action
// and its input by the rule every asmp client follows (see Resolve).
//
// # Backends
//
// *Client talks HTTP to an asmp server (or any server that speaks ASMP).
// NewLocal drives an *engine.Engine in the same process with no server, the
// way the TypeScript SDK's local FSM does. Both implement Backend and pass
// the same test table, so code written against Backend (the terminal UI, the
// agent commands) works with either.
//
// # Streams
//
// Stream returns an iterator over a run's NDJSON stream: frames, progress
// reports, heartbeats and end lines. It reconnects by itself after a dropped
// connection or a "slow_consumer"/"shutdown" end line, resuming with
// Last-Event-ID so that no frame is lost or repeated, and it stops after a
// terminal frame.
//
// # The OIP ledger
//
// *Client also speaks to the server's OIP dispatch ledger under /api/:
// Dispatch and DispatchJSON append directory rows and invocations and
// return receipts, Invoke records (and, where allowed, executes) an
// invocation of a row, Receipt, Latest and History replay records,
// Directory and DirectoryRows list the current rows, Command builds a row's
// exact argv, and Checkpoint, LedgerKey, Proof, Consistency and
// VerifyReceipt give (and check) the ledger's signed checkpoints and
// Merkle proofs. These use package oip's types.
//
// # Errors
//
// Every error from the server (and from the local engine) is an *Error that
// carries the HTTP status, the error code and the server's hint. Use
// errors.Is with ErrNotFound, ErrForbidden, ErrConflict, … or the helpers
// IsNotFound, IsForbidden and IsConflict. An *Error also unwraps to a
// *protocol.Error, so code that handles protocol errors handles these too.
//
// The package never writes to stdout or stderr and never exits the process.
package client
