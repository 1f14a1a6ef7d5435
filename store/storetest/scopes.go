package storetest

import (
	"context"
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/asmp-dev/asmp/store"
)

// DispatcherScopes tests store.DispatcherScopes on stores made by newStore
// (skipped for a store without it): unknown → ErrNotFound; the scopes put
// read back; the first put of an inv_ID stands; an empty list is kept.
func DispatcherScopes(t *testing.T, newStore Factory) {
	s := newStore(t)
	if c, ok := any(s).(io.Closer); ok {
		t.Cleanup(func() { _ = c.Close() })
	}
	ds, ok := s.(store.DispatcherScopes)
	if !ok {
		t.Skip("the store does not keep dispatcher scopes")
	}
	ctx := context.Background()
	if _, err := ds.DispatcherScopes(ctx, "inv_none"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown inv_ID: %v, want ErrNotFound", err)
	}
	if err := ds.PutDispatcherScopes(ctx, "inv_a", []string{"read", "exec"}); err != nil {
		t.Fatal(err)
	}
	if err := ds.PutDispatcherScopes(ctx, "inv_a", []string{"read"}); err != nil {
		t.Fatal(err)
	}
	if err := ds.PutDispatcherScopes(ctx, "inv_b", []string{}); err != nil {
		t.Fatal(err)
	}
	if got, err := ds.DispatcherScopes(ctx, "inv_a"); err != nil || !slices.Equal(got, []string{"read", "exec"}) {
		t.Fatalf("inv_a: %v %v, want the first put's [read exec]", got, err)
	}
	if got, err := ds.DispatcherScopes(ctx, "inv_b"); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("inv_b: %#v %v, want an empty list", got, err)
	}
}
