// Package client is the Go SDK for ASMP servers: it drives runs of remote
// workflows over HTTP through Backend, the interface that package
// client/embedded also implements in-process. It imports nothing outside
// the standard library (and this module's protocol and oip/wire, which
// import nothing either), so a program that only drives remote runs does
// not inherit the server; a test enforces it.
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
// The opt-in package client/embedded drives an *engine.Engine in the same
// process with no server, the way the TypeScript SDK's local FSM does
// (embedded.New); it imports the engine and so what a server needs. Both
// implement Backend and pass the same test table, so code written against
// Backend (the terminal UI, the agent commands) works with either.
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
// exact argv, and Checkpoint, LedgerKey, Proof and Consistency give the
// ledger's signed checkpoints and Merkle proofs. These use the API types of
// package oip/wire (package oip's types of the same names are aliases).
//
// Checking a receipt offline needs RFC 8785 canonical JSON, signed notes
// and Merkle proofs, which the standard library lacks; it lives in the
// opt-in package oip/verify, which takes a *Client as its verify.Ledger:
//
//	rec, proof, err := verify.ReceiptFrom(ctx, c, invID, pinnedKey)
//
// # Errors
//
// Every error from the server (and from an embedded engine) is an *Error that
// carries the HTTP status, the error code and the server's hint. Use
// errors.Is with ErrNotFound, ErrForbidden, ErrConflict, … or the helpers
// IsNotFound, IsForbidden and IsConflict. An *Error also unwraps to a
// *protocol.Error, so code that handles protocol errors handles these too.
//
// The package never writes to stdout or stderr and never exits the process.
package client
