package client_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/protocol"
)

// refLine is a stream frame line as the reference servers write it: the
// frame's properties plus "id" as a JSON string.
func refLine(t *testing.T, id, state, status string) string {
	t.Helper()
	f := protocol.Frame{RunID: "0190c0de-0000-7000-8000-000000000001", WorkflowID: "ref-v1", State: state, Status: status,
		Hint: "Reference frame.", NextStates: []protocol.NextState{}}
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	idJSON, _ := json.Marshal(id)
	return `{"id":` + string(idJSON) + `,` + string(b[1:])
}

// refStream is a stream endpoint that behaves like the reference servers:
// string ids; the first connection sends one frame and drops, the second
// (which must resume after it) replays it and ends the run.
type refStream struct {
	t        *testing.T
	ids      [2]string
	mu       sync.Mutex
	lastIDs  []string
	attempts int
}

func (s *refStream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.attempts++
	n := s.attempts
	s.lastIDs = append(s.lastIDs, r.Header.Get("Last-Event-ID"))
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-ndjson")
	switch n {
	case 1:
		fmt.Fprintln(w, refLine(s.t, s.ids[0], "A", "active"))
		fmt.Fprintf(w, `{"id":%q,"progress":"10%%","hint":"working"}`+"\n", s.ids[0])
		fmt.Fprintf(w, `{"id":%q,"heartbeat":true}`+"\n", s.ids[0])
	case 2:
		fmt.Fprintln(w, refLine(s.t, s.ids[0], "A", "active")) // the reference replays from the id given
		fmt.Fprintln(w, refLine(s.t, s.ids[1], "B", "completed"))
	default:
		http.Error(w, `{"hint":"no more"}`, http.StatusGone)
	}
}

// The reference servers send "id": "0" (a string). The stream takes it,
// resumes with Last-Event-ID set to it, skips the replayed frame, and
// ends with the terminal frame instead of giving up after its retries.
func TestStreamStringIDs(t *testing.T) {
	for _, ids := range [][2]string{{"0", "1"}, {"evt-a", "evt-b"}} {
		t.Run(ids[0], func(t *testing.T) {
			rs := &refStream{t: t, ids: ids}
			ts := httptest.NewServer(rs)
			defer ts.Close()
			c, err := client.New(ts.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			var states []string
			var kinds []string
			for it, err := range c.Stream(ctx(t), "0190c0de-0000-7000-8000-000000000001", &client.StreamOptions{Backoff: time.Millisecond, MaxRetries: 2}) {
				if err != nil {
					t.Fatalf("stream error after %v: %v", states, err)
				}
				switch {
				case it.Frame != nil:
					states = append(states, it.Frame.State)
					kinds = append(kinds, "frame")
				case it.Progress != nil:
					kinds = append(kinds, "progress:"+it.Progress.Progress)
				case it.Heartbeat != nil:
					kinds = append(kinds, "heartbeat")
				}
			}
			numeric := ids[0] == "0"
			want := "A,B"
			if !numeric {
				want = "A,A,B" // ids that are not numbers cannot be compared: the replay is yielded
			}
			if got := strings.Join(states, ","); got != want {
				t.Fatalf("states = %s, want %s (%v)", got, want, kinds)
			}
			if kinds[1] != "progress:10%" || kinds[2] != "heartbeat" {
				t.Fatalf("items = %v", kinds)
			}
			rs.mu.Lock()
			defer rs.mu.Unlock()
			if len(rs.lastIDs) != 2 || rs.lastIDs[0] != "" || rs.lastIDs[1] != ids[0] {
				t.Fatalf("Last-Event-ID sent = %q, want [\"\" %q]", rs.lastIDs, ids[0])
			}
		})
	}
}

func TestParseStreamLineIDs(t *testing.T) {
	for line, want := range map[string]int64{
		`{"id":"7","progress":"1%"}`:   7,
		`{"id":7,"progress":"1%"}`:     7,
		`{"id":"x","heartbeat":true}`:  0,
		`{"id":"12","end":"shutdown"}`: 12,
		`{"progress":"1%"}`:            0,
		`{"id":null,"heartbeat":true}`: 0,
		`{"id":"3","state":"S","status":"active","run_id":"r","workflow_id":"w","hint":"","next_states":[]}`: 3,
	} {
		it, err := client.ParseStreamLine([]byte(line))
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if it.ID() != want {
			t.Errorf("%s: id %d, want %d", line, it.ID(), want)
		}
	}
	for _, bad := range []string{`{"id":1.5,"progress":"1%"}`, `{"id":true,"heartbeat":true}`, `{"id":{},"state":"S"}`} {
		if _, err := client.ParseStreamLine([]byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}
