package storetest

import (
	"fmt"
	"testing"
)

// testListDeliveriesOutOfOrder: deliveries whose ids do not grow with
// the commits that store them (ids are the caller's) still list by id,
// newest (highest) first.
func testListDeliveriesOutOfOrder(t *testing.T, s RunsAndWebhooks) {
	putSub(t, s, Sub("a"))
	r := createWith(t, s, "run", Out("d5", "a", "1"))
	for i, id := range []string{"d3", "d9", "d1"} {
		r = commitWith(t, s, r, Out(id, "a", fmt.Sprint(i+2)))
	}
	if got := fmt.Sprint(deliveryIDs(mustList(t, s, "a", "", 0))); got != "[d9 d5 d3 d1]" {
		t.Fatalf("deliveries = %s, want [d9 d5 d3 d1]", got)
	}
	if got := fmt.Sprint(deliveryIDs(mustList(t, s, "a", "d5", 0))); got != "[d3 d1]" {
		t.Fatalf("deliveries after d5 = %s, want [d3 d1]", got)
	}
}
