package oip

import "github.com/asmp-dev/asmp/oip/wire"

// The ledger's API types are those of package oip/wire, which clients read
// without importing the server.
type (
	// Record is one immutable ledger entry as the API serves it.
	Record = wire.Record
	// Receipt is the answer to a successful dispatch.
	Receipt = wire.Receipt
	// Outcome is what became of an invocation: refused before running, or
	// the result of running it.
	Outcome = wire.Outcome
	// Stream is a captured output stream of an execution.
	Stream = wire.Stream
	// History is the answer of GET /api/dispatch?key=K&history=true.
	History = wire.History
	// Checkpoint is a signed statement of the ledger's Merkle tree at one
	// size.
	Checkpoint = wire.Checkpoint
	// Proof is an inclusion proof of one record, with the signed
	// checkpoint of its tree.
	Proof = wire.Proof
	// ConsistencyProof proves that the tree of To records extends the tree
	// of From records.
	ConsistencyProof = wire.ConsistencyProof
)

// MaxReplayedBy is how many inv_IDs a record's replayed_by lists at most
// (Record.ReplayedByMore says when more replay it).
const MaxReplayedBy = wire.MaxReplayedBy

// Record types the ledger holds.
const (
	TypeDirectoryRow     = wire.TypeDirectoryRow     // a CLI directory row (SPEC section 8)
	TypeInvocation       = wire.TypeInvocation       // an invocation of a row (SPEC section 9)
	TypeInvocationResult = wire.TypeInvocationResult // the outcome of an executed invocation
)

// TimeFormat is the layout of every ledger timestamp: RFC 3339, UTC, whole
// seconds, "Z" (for example 2023-10-27T10:00:00Z).
const TimeFormat = wire.TimeFormat

// Receipt statuses and the success message.
const (
	StatusSuccess  = wire.StatusSuccess
	StatusError    = wire.StatusError
	SuccessMessage = wire.SuccessMessage
)

// Outcome classes.
const (
	OutcomeSucceeded = wire.OutcomeSucceeded
	OutcomeFailed    = wire.OutcomeFailed
	OutcomeRefused   = wire.OutcomeRefused
)
