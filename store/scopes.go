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
