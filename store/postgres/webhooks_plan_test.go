package postgres

import (
	"strings"
	"testing"
	"time"
)

// Claiming deliveries and finding the next one walk
// webhook_deliveries_ready from its start and check each candidate's
// queue head through webhook_deliveries_queue and its subscription by
// key: no scan of the pending deliveries and no sort, so a claim costs
// the due deliveries, not the pending ones.
func TestDeliveryClaimUsesItsIndexes(t *testing.T) {
	s := openPlanStore(t)
	now := time.Unix(100, 0)
	for name, q := range map[string][]any{
		claimDeliveriesQuery: {now, 100, "w", now.Add(time.Minute)},
		nextDeliveryQuery:    nil,
	} {
		plan := explain(t, s, name, q...)
		if !strings.Contains(plan, "using webhook_deliveries_ready") || !strings.Contains(plan, "using webhook_deliveries_queue") ||
			!strings.Contains(plan, "using webhook_subscriptions_pkey") || strings.Contains(plan, "Sort") || strings.Contains(plan, "Seq Scan") {
			t.Errorf("plan of\n%s\n%s\nwant a walk of webhook_deliveries_ready, no sort", name, plan)
		}
	}
}

// A subscription's list of deliveries walks webhook_deliveries_sub
// backwards from the cursor.
func TestDeliveryListUsesItsIndex(t *testing.T) {
	s := openPlanStore(t)
	for q, args := range map[string][]any{listDeliveriesQuery: {"s", 10}, listDeliveriesAfterQuery: {"s", 10, "x"}} {
		plan := explain(t, s, q, args...)
		if !strings.Contains(plan, "Backward using webhook_deliveries_sub") || strings.Contains(plan, "Sort") {
			t.Errorf("plan of the list of deliveries:\n%s", plan)
		}
	}
}

// Retention walks webhook_deliveries_settled from its start and deletes
// what it found by key: no scan of the deliveries, pending or settled
// (neither a sequential one nor a walk of the whole primary key for a
// join), and no sort, so a prune costs the deliveries it deletes (their
// attempts go by the cascade, through webhook_attempts' primary key), not
// those stored.
func TestDeliveryPruneUsesItsIndex(t *testing.T) {
	s := openPlanStore(t)
	plan := explain(t, s, pruneDeliveriesQuery, time.Unix(100, 0), 1000)
	if !strings.Contains(plan, "using webhook_deliveries_settled") || !strings.Contains(plan, "Index Cond: (id = ANY") ||
		strings.Contains(plan, "Sort") || strings.Contains(plan, "Seq Scan") || strings.Contains(plan, "Join") {
		t.Errorf("plan of the prune:\n%s\nwant a walk of webhook_deliveries_settled and deletions by key, no sort", plan)
	}
}
