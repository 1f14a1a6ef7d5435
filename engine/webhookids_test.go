package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"testing"
	"time"
)

// TestWebhookIDsAreStable checks the message and delivery ids against
// their definition (docs/WEBHOOKS.md): a message id is "msg_" and the hex
// of the first 16 bytes of SHA-256(run NUL seq NUL type); a delivery id
// is "dlv_", the event's Unix nanoseconds in 16 hex digits, the hex of the
// first 12 bytes of SHA-256(subscription NUL run NUL seq), and k. Receivers
// deduplicate on message ids, so they never change between releases.
func TestWebhookIDsAreStable(t *testing.T) {
	long := string(make([]byte, 300)) // longer than the id functions' stack buffers
	for _, c := range []struct {
		sub, run, typ string
		seq           int64
		at            time.Time
		k             int
	}{
		{"wh_1", "0193a1b2-run", "run.state_changed", 7, time.Date(2026, 12, 3, 15, 4, 5, 6, time.UTC), 0},
		{"wh_abc", "r", "run.completed", 1 << 40, time.Unix(0, 1), 12},
		{"", "", "", 0, time.Unix(0, 0), 0},
		{long, long, long, -1, time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC), 3},
	} {
		h := sha256.Sum256([]byte(c.run + "\x00" + strconv.FormatInt(c.seq, 10) + "\x00" + c.typ))
		if got, want := messageID(c.run, c.seq, c.typ), "msg_"+hex.EncodeToString(h[:16]); got != want {
			t.Errorf("messageID(%.10q, %d, %.10q) = %s, want %s", c.run, c.seq, c.typ, got, want)
		}
		h = sha256.Sum256([]byte(c.sub + "\x00" + c.run + "\x00" + strconv.FormatInt(c.seq, 10)))
		want := fmt.Sprintf("dlv_%016x%s%d", uint64(c.at.UnixNano()), hex.EncodeToString(h[:12]), c.k)
		if got := deliveryID(c.sub, c.run, c.seq, c.at, c.k); got != want {
			t.Errorf("deliveryID(%.10q, %.10q, %d, %s, %d) = %s, want %s", c.sub, c.run, c.seq, c.at, c.k, got, want)
		}
	}
}
