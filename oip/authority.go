package oip

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/mod/sumdb/note"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/workflow"
)

// ServerPrincipal is the principal of what the server dispatches itself
// (the built-in examples' rows at start-up): it holds every scope, and no
// token may take its name.
const ServerPrincipal = "asmp-serve"

// Who can change what runs (SPEC section 16): a workflow tool or task
// bound to a row runs the version its workflow pins (row: KEY@inv_ID), or
// else the row's current version only if whoever dispatched that version
// held the exec scope then (or was the server itself). The scopes of a
// row's dispatcher are recorded beside the record when it is dispatched
// (store.LedgerRecord.DispatcherScopes), in the transaction that appends
// it, since a token's scopes may change later.

// rowCallKey marks the context of an invocation made for a workflow tool
// or task (Invoker), with the version pinned by the workflow, if any.
type rowCallKey struct{}

type rowCall struct {
	pinned *store.LedgerRecord // the version the workflow pins; nil: the current one
	ref    string              // the workflow's row reference, for reasons
}

func withRowCall(ctx context.Context, rc rowCall) context.Context {
	return context.WithValue(ctx, rowCallKey{}, rc)
}

func rowCallOf(ctx context.Context) (rowCall, bool) {
	rc, ok := ctx.Value(rowCallKey{}).(rowCall)
	return rc, ok
}

// dispatcherScopes returns the scopes of the principal in ctx, signed,
// as they are stored with the record invID it dispatches
// (store.LedgerRecord.DispatcherScopes), in the append's transaction.
func (s *Service) dispatcherScopes(ctx context.Context, invID string) ([]string, error) {
	p := auth.FromContext(ctx)
	scopes := slices.Clone(p.Scopes)
	if scopes == nil {
		scopes = []string{}
	}
	// The scopes are kept outside the signed ledger: they carry this
	// server's signature, so that an edit of the database cannot grant a
	// dispatcher the exec it did not hold.
	sig, err := s.key.signer.Sign(scopesMessage(invID, scopes))
	if err != nil {
		return nil, fmt.Errorf("oip: sign the dispatcher's scopes: %w", err)
	}
	return append(scopes, scopesSigPrefix+base64.StdEncoding.EncodeToString(sig)), nil
}

// scopesSigPrefix marks the element of recorded scopes that holds their
// signature.
const scopesSigPrefix = "sig:"

// scopesMessage is what the signature of a dispatcher's scopes signs.
func scopesMessage(invID string, scopes []string) []byte {
	return []byte("asmp dispatcher scopes\n" + invID + "\n" + strings.Join(scopes, ",") + "\n")
}

// signedScopes reports whether recorded scopes end with this server's
// signature of the others, for the record invID. The caller's slice is
// cut to the scopes themselves.
func (s *Service) signedScopes(invID string, scopes []string) bool {
	if len(scopes) == 0 || !strings.HasPrefix(scopes[len(scopes)-1], scopesSigPrefix) {
		return false
	}
	sig, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(scopes[len(scopes)-1], scopesSigPrefix))
	if err != nil {
		return false
	}
	v, err := note.NewVerifier(s.key.vkey)
	return err == nil && v.Verify(scopesMessage(invID, scopes[:len(scopes)-1]), sig)
}

// mayRunForWorkflow reports whether a workflow may run the row version
// rec without pinning it: its dispatcher held exec when dispatching it, or
// was the server. When not, reason says so and what to do.
func (s *Service) mayRunForWorkflow(ctx context.Context, rec store.LedgerRecord) (ok bool, reason string, err error) {
	if rec.Source == ServerPrincipal {
		return true, "", nil
	}
	held := "did not hold the exec scope when it dispatched it"
	scopes, err := s.st.DispatcherScopes(ctx, rec.InvID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		held = "is not known to have held the exec scope when it dispatched it (no scopes were recorded)"
	case err != nil:
		return false, "", err
	case !s.signedScopes(rec.InvID, scopes):
		held = "is not known to have held the exec scope when it dispatched it (its recorded scopes do not carry this server's signature: edited in the database, or recorded under an earlier signing key)"
		s.log.Warn("a dispatcher's recorded scopes fail their signature check", "inv_ID", rec.InvID, "key", rec.Key)
	case auth.MayExecute(true, auth.Principal{Name: rec.Source, Scopes: scopes}): // the dispatcher, as it was when it dispatched
		return true, "", nil
	}
	return false, fmt.Sprintf("The directory row %s is at version %s, dispatched by %q, which %s: a workflow runs a row's current version only when its dispatcher holds exec. Dispatch the row again with a token holding exec, or pin a version in the workflow (row: %s).",
		rec.Key, rec.InvID, rec.Source, held, workflow.PinRow(rec.Key, "inv_ID")), nil
}

// pinnedRow returns the directory row version ref pins, checked against
// its leaf, checking it is one of key; notFound is the hint when it is
// not.
func (s *Service) pinnedRow(ctx context.Context, key, invID string) (rec store.LedgerRecord, notFound string, err error) {
	rec, err = s.st.LedgerRecord(ctx, invID)
	if err == nil {
		if rec, err = s.checkedStore(ctx, rec); err != nil {
			return store.LedgerRecord{}, "", err
		}
	}
	if errors.Is(err, store.ErrNotFound) || err == nil && (rec.Type != TypeDirectoryRow || rec.Key != key) {
		return rec, fmt.Sprintf("The workflow pins the directory row %s at version %s, which is not a version of that row in the ledger; pin an inv_ID from GET /api/dispatch?key=%s&history=true.", key, protocol.Truncate(invID, 64), key), nil
	}
	if err != nil {
		return rec, "", fmt.Errorf("oip: read the pinned row version: %w", err)
	}
	return rec, "", nil
}
