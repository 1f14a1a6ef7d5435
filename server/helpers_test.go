package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/clock"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/server"
	"github.com/asmp-dev/asmp/spec"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/memstore"
	"github.com/asmp-dev/asmp/store/sqlite"
	"github.com/asmp-dev/asmp/workflow"
)

// backends are the stores every API test runs against.
var backends = map[string]func(t *testing.T) store.Store{
	"memory": func(t *testing.T) store.Store { return memstore.New() },
	"sqlite": func(t *testing.T) store.Store {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "api.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	},
}

type env struct {
	t   *testing.T
	url string
	eng *engine.Engine
	st  store.Store
	srv *server.Server
}

type storeT = store.Store

type setup struct {
	defs    []*workflow.Definition
	opts    *server.Options
	newStor func(t *testing.T) store.Store
	clock   clock.Clock // the engine's (nil: the wall clock)
	eopts   *engine.Options
}

func start(t *testing.T, s setup) *env {
	t.Helper()
	if s.defs == nil {
		s.defs = examples.AllWith(testExamples)
	}
	if s.newStor == nil {
		s.newStor = backends["memory"]
	}
	st := s.newStor(t)
	eopts := s.eopts
	if s.clock != nil {
		if eopts == nil {
			eopts = &engine.Options{}
		}
		eopts.Clock = s.clock
	}
	eng, err := engine.New(st, s.defs, eopts)
	if err != nil {
		t.Fatal(err)
	}
	w := eng.StartWorkers(&engine.WorkerOptions{Poll: 50 * time.Millisecond})
	srv := server.New(eng, s.opts)
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		srv.Shutdown()
		hs.Close()
		w.Stop(time.Second)
		st.Close()
	})
	return &env{t: t, url: hs.URL, eng: eng, st: st, srv: srv}
}

type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body is not a JSON object: %v\n%s", err, r.body)
	}
	return m
}

// hint returns the error body's hint and checks every error carries one.
func (r resp) hint(t *testing.T) string {
	t.Helper()
	m := r.json(t)
	h, ok := m["hint"].(string)
	if !ok || h == "" {
		t.Fatalf("error body without a hint (status %d): %s", r.status, r.body)
	}
	return h
}

func (e *env) do(method, path string, body any, headers ...string) resp {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	url := path
	if !strings.HasPrefix(path, "http") {
		url = e.url + path
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{status: res.StatusCode, header: res.Header, body: b}
}

// frame checks r is status with a State Frame that validates against the
// canonical schema, and returns it.
func frame(t *testing.T, r resp, status int) protocol.Frame {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	if err := spec.Validate(spec.StateFrame, r.body); err != nil {
		t.Fatalf("frame does not validate: %v\n%s", err, r.body)
	}
	var f protocol.Frame
	if err := json.Unmarshal(r.body, &f); err != nil {
		t.Fatal(err)
	}
	return f
}

// cli checks r is a 200 CLI object valid against the schema and returns it.
func cliObj(t *testing.T, r resp) protocol.CLI {
	t.Helper()
	if r.status != 200 {
		t.Fatalf("CLI status %d: %s", r.status, r.body)
	}
	if err := spec.Validate(spec.CLI, r.body); err != nil {
		t.Fatalf("CLI object does not validate: %v\n%s", err, r.body)
	}
	var c protocol.CLI
	if err := json.Unmarshal(r.body, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

func (e *env) startRun(wf string) protocol.Frame {
	e.t.Helper()
	body := map[string]any{}
	if wf != "" {
		body["workflow_id"] = wf
	}
	return frame(e.t, e.do("POST", "/runs", body), 201)
}

func (e *env) fire(runID, action string, body any) resp {
	e.t.Helper()
	return e.do("POST", "/runs/"+runID+"/transitions/"+action, body)
}

func (e *env) events(runID string) []map[string]any {
	e.t.Helper()
	r := e.do("GET", "/runs/"+runID+"/events", nil)
	if r.status != 200 {
		e.t.Fatalf("events: %d %s", r.status, r.body)
	}
	var out struct {
		Events []map[string]any `json:"events"`
	}
	json.Unmarshal(r.body, &out)
	return out.Events
}

var (
	serverOptsTrust  = server.Options{TrustProxy: loopbackProxy}
	serverOptsPublic = server.Options{PublicURL: "https://api.example.com/asmp/"}
)

func contextWithCancel() (context.Context, context.CancelFunc) {
	return context.WithCancel(context.Background())
}

// loopbackProxy trusts the test's own client as a reverse proxy.
var loopbackProxy = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
