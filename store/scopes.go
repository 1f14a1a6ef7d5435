package store

import "context"

// DispatcherScopes is implemented by stores that keep, beside each ledger
// record and outside it (not hashed, not part of the record's JSON), the
// scopes its dispatcher held when it dispatched it: what the OIP service
// needs to decide whether the current version of a directory row may run
// for a workflow (SPEC section 16, "Who can change what runs").
type DispatcherScopes interface {
	// PutDispatcherScopes records the scopes of the dispatcher of the
	// record invID.
	PutDispatcherScopes(ctx context.Context, invID string, scopes []string) error
	// DispatcherScopes returns them; ErrNotFound when none were recorded
	// (a record of an older release, or a crash between the two writes).
	DispatcherScopes(ctx context.Context, invID string) ([]string, error)
}

// LedgerHeadsChecker is implemented by stores that keep an index of each
// key's latest record (ledger_heads) in a file or database others may
// write: CheckLedgerHeads returns the first key whose entry disagrees with
// the ledger (missing, naming another record or type, or naming no record
// of its key) or that has a record with a seq below 1 (outside every range
// the checks walk), or "" when every entry agrees. The ledger's full check calls
// it: an edited index could hide a row from the directory.
type LedgerHeadsChecker interface {
	CheckLedgerHeads(ctx context.Context) (key string, err error)
}
