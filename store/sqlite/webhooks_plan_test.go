package sqlite

import (
	"strings"
	"testing"
)

// Claiming deliveries and finding the next one walk
// webhook_deliveries_ready from its start and check each candidate's
// queue head through webhook_deliveries_queue and its subscription by
// key: no scan of the pending deliveries and no sort, so a claim costs
// the due deliveries, not the pending ones.
func TestDeliveryClaimUsesItsIndexes(t *testing.T) {
	t.Parallel()
	for name, q := range map[string]string{
		"claim":         claimDeliveriesQuery,
		"next delivery": nextDeliveryQuery,
	} {
		var args []any
		if name == "claim" {
			args = []any{"w", 9, 5, 100}
		}
		p := queryPlan(t, q, args...)
		if !strings.Contains(p, "INDEX webhook_deliveries_ready") || !strings.Contains(p, "INDEX webhook_deliveries_queue") ||
			strings.Contains(p, "SCAN webhook_subscriptions") || strings.Contains(p, "SCAN webhook_deliveries;") ||
			strings.HasSuffix(p, "SCAN webhook_deliveries") || strings.Contains(p, "TEMP B-TREE") {
			t.Errorf("plan of the %s: %s", name, p)
		}
	}
}

// A subscription's list of deliveries walks webhook_deliveries_sub
// backwards from the cursor.
func TestDeliveryListUsesItsIndex(t *testing.T) {
	t.Parallel()
	for q, args := range map[string][]any{listDeliveriesQuery: {"s", 10}, listDeliveriesAfterQuery: {"s", 10, "x"}} {
		if p := queryPlan(t, q, args...); !strings.Contains(p, "webhook_deliveries_sub") || strings.Contains(p, "TEMP B-TREE") {
			t.Errorf("plan of the list of deliveries: %s", p)
		}
	}
}

// Retention walks webhook_deliveries_settled from its start (no scan of
// the deliveries, pending or settled, and no sort) and finds each pruned
// delivery's attempts by the primary key of webhook_attempts: a prune
// costs the deliveries it deletes, not those stored.
func TestDeliveryPruneUsesItsIndexes(t *testing.T) {
	t.Parallel()
	for name, q := range map[string]string{"attempts": pruneAttemptsQuery, "deliveries": pruneDeliveriesQuery} {
		p := queryPlan(t, q, 5, 1000)
		if !strings.Contains(p, "INDEX webhook_deliveries_settled") || strings.Contains(p, "SCAN webhook_deliveries;") ||
			strings.HasSuffix(p, "SCAN webhook_deliveries") || strings.Contains(p, "SCAN webhook_attempts") || strings.Contains(p, "TEMP B-TREE") {
			t.Errorf("plan of the prune of the %s: %s", name, p)
		}
	}
}
