package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/client"
)

func TestParseETag(t *testing.T) {
	for etag, want := range map[string]int64{
		`"3"`: 3, `W/"3"`: 3, `3`: 3, ` "12" `: 12, `"0"`: 0,
		`"-1"`: 0, `x`: 0, ``: 0, `"3.5"`: 0,
	} {
		if got := client.ParseETag(etag); got != want {
			t.Errorf("ParseETag(%q) = %d, want %d", etag, got, want)
		}
	}
}

func TestStreamOptionsWithDefaults(t *testing.T) {
	var nilOpts *client.StreamOptions
	d := nilOpts.WithDefaults()
	if d.MaxRetries != client.DefaultStreamRetries || d.Backoff != client.DefaultBackoff ||
		d.MaxBackoff != client.DefaultMaxBackoff || d.IdleTimeout != client.DefaultIdleTimeout || d.LastEventID != 0 {
		t.Fatalf("defaults = %+v", d)
	}
	o := (&client.StreamOptions{LastEventID: 7, MaxRetries: -1, Backoff: time.Millisecond, IdleTimeout: -1}).WithDefaults()
	if o.LastEventID != 7 || o.MaxRetries != 0 || o.Backoff != time.Millisecond || o.MaxBackoff != client.DefaultMaxBackoff || o.IdleTimeout != -1 {
		t.Fatalf("with defaults = %+v", o)
	}
	// Wait gives up at once when the context has ended.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if o.Wait(ctx, 1) {
		t.Fatal("Wait slept on an ended context")
	}
	if !o.Wait(context.Background(), 1) {
		t.Fatal("Wait did not return after its backoff")
	}
}
