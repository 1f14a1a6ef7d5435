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
// resumes with Last-Event-ID set to it, skips the replayed frame (by its
// content: ids that are not numbers cannot be compared), and ends with the
// terminal frame instead of giving up after its retries.
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
			want := "A,B" // the replay of A shows the run as A did: skipped, whatever its id
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

// restartingStream numbers the lines of every connection from "0", as the
// reference servers do, and sends each connection's frames from conns.
type restartingStream struct {
	t       *testing.T
	conns   [][]string // states per connection; the last one ends the run
	mu      sync.Mutex
	lastIDs []string
}

func (s *restartingStream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	n := len(s.lastIDs)
	s.lastIDs = append(s.lastIDs, r.Header.Get("Last-Event-ID"))
	s.mu.Unlock()
	if n >= len(s.conns) {
		http.Error(w, `{"hint":"no more"}`, http.StatusGone)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	for i, state := range s.conns[n] {
		status := "active"
		if n == len(s.conns)-1 && i == len(s.conns[n])-1 {
			status = "completed"
		}
		fmt.Fprintln(w, refLine(s.t, fmt.Sprint(i), state, status))
	}
}

// A server that restarts ids at "0" on each connection: the frames of a
// run that changed while the client was disconnected are yielded (their
// ids are not above the last one's), a replay of the last frame is not,
// and the ids are sent back as they came.
func TestStreamIDsRestartPerConnection(t *testing.T) {
	for name, c := range map[string]struct {
		conns [][]string
		want  string
	}{
		"changed while disconnected": {[][]string{{"A"}, {"B", "C"}}, "A,B,C"},
		"current frame replayed":     {[][]string{{"A", "B"}, {"B", "C"}}, "A,B,C"},
		"changed and changed back":   {[][]string{{"A", "B", "C"}, {"A", "D"}}, "A,B,C,A,D"},
	} {
		t.Run(name, func(t *testing.T) {
			rs := &restartingStream{t: t, conns: c.conns}
			ts := httptest.NewServer(rs)
			defer ts.Close()
			cl, err := client.New(ts.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			var states []string
			for it, err := range cl.Stream(ctx(t), "0190c0de-0000-7000-8000-000000000001", &client.StreamOptions{Backoff: time.Millisecond, MaxRetries: 2}) {
				if err != nil {
					t.Fatalf("stream error after %v: %v", states, err)
				}
				if it.Frame != nil {
					states = append(states, it.Frame.State)
				}
			}
			if got := strings.Join(states, ","); got != c.want {
				t.Fatalf("states = %s, want %s", got, c.want)
			}
			rs.mu.Lock()
			defer rs.mu.Unlock()
			if want := fmt.Sprint(len(c.conns[0]) - 1); len(rs.lastIDs) != 2 || rs.lastIDs[1] != want {
				t.Fatalf("Last-Event-ID sent = %q, want the last id of the first connection, %q", rs.lastIDs, want)
			}
		})
	}
}

// A streamed frame takes its stream id as the run's version only when the
// id is above the shown version; otherwise it has no ETag (no If-Match).
func TestStreamedFrameVersion(t *testing.T) {
	shown := &client.RunFrame{ETag: `"3"`}
	if f := shown.Streamed(&protocol.StreamFrame{ID: 4}); f.ETag != `"4"` || f.Version() != 4 {
		t.Fatalf("id 4 after version 3: ETag %q", f.ETag)
	}
	if f := shown.Streamed(&protocol.StreamFrame{ID: 1}); f.ETag != "" {
		t.Fatalf("id 1 after version 3 (a reference stream): ETag %q, want none", f.ETag)
	}
}
