// Package execution declares what the OIP ledger hands to the program that
// runs a directory row's command: one Execution, run by an Executor, whose
// Outcome is recorded. It is the whole contract between the ledger service
// (package oip) and the sandboxed executor (package oip/runner), so that
// the executor depends on nothing of the ledger service (no store, no
// engine, no Merkle tree).
package execution

import (
	"context"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/oip/command"
	"github.com/asmp-dev/asmp/oip/row"
	"github.com/asmp-dev/asmp/oip/wire"
)

// Execution is one invocation to run, handed to an Executor after its
// attempt record is in the ledger.
type Execution struct {
	AttemptID string // inv_ID of the attempt record
	Key       string // the invocation's key
	RowKey    string // the directory row's key (object_key)
	RowInvID  string // inv_ID of the row version used
	Row       *row.Row
	Command   *command.Command
	Principal auth.Principal
}

// Executor runs invocations dispatched with "execute": true. It is the
// extension point for SPEC section 9's execution: it enforces the
// allowlist (returning an OutcomeRefused outcome for commands not on it),
// the timeout (the row's, else its default), a clean environment, no
// stdin, output caps, and never uses a shell unless the row's method is
// shell. The ledger calls it only when the principal may execute. The
// context it gets is not cancelled when the client goes away, so the
// result is always recorded; it is cancelled with the dispatcher's context
// only when that was marked with oip.CancelExecution.
type Executor interface {
	Execute(ctx context.Context, x Execution) Outcome
}

// Outcome is what became of an invocation: refused before running, or the
// result of running it (the ledger's wire type).
type Outcome = wire.Outcome

// Stream is a captured output stream of an execution.
type Stream = wire.Stream

// Outcome classes.
const (
	OutcomeSucceeded = wire.OutcomeSucceeded
	OutcomeFailed    = wire.OutcomeFailed
	OutcomeRefused   = wire.OutcomeRefused
)
