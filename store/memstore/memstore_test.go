package memstore_test

import (
	"testing"

	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/memstore"
	"github.com/asmp-dev/asmp/store/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store { return memstore.New() })
}

func TestLedgerCheckpointsConformance(t *testing.T) {
	t.Parallel()
	storetest.RunLedgerCheckpoints(t, func(t *testing.T) store.Store { return memstore.New() })
}

// The store says what it offers: nothing beyond the contract (in memory,
// one process's, commits applied before CommitRun returns).
func TestCapabilities(t *testing.T) {
	t.Parallel()
	if got := memstore.New().Capabilities(); got != (store.Capabilities{}) {
		t.Fatalf("Capabilities = %+v, want the zero value", got)
	}
}
