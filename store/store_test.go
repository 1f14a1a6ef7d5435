package store_test

import (
	"errors"
	"testing"

	"github.com/asmp-dev/asmp/store"
)

// A settled Pending gives its outcome at once; the zero Pending is a
// success; a later one gives what its channel delivers, once it does.
func TestPending(t *testing.T) {
	boom := errors.New("boom")
	if err := store.Settled(boom).Wait(); !errors.Is(err, boom) {
		t.Fatalf("Settled(boom).Wait() = %v", err)
	}
	if err := store.Settled(nil).Wait(); err != nil {
		t.Fatalf("Settled(nil).Wait() = %v", err)
	}
	if err := (store.Pending{}).Wait(); err != nil {
		t.Fatalf("zero Pending: %v", err)
	}
	done := make(chan error) // unbuffered: Wait must receive
	p := store.Later(done)
	go func() { done <- boom }()
	if err := p.Wait(); !errors.Is(err, boom) {
		t.Fatalf("Later: %v, want what the channel delivered", err)
	}
	done = make(chan error, 1)
	done <- nil
	if err := store.Later(done).Wait(); err != nil {
		t.Fatalf("Later(nil outcome): %v", err)
	}
}
