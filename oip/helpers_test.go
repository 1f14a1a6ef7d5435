package oip

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/memstore"
	"github.com/asmp-dev/asmp/store/sqlite"
)

// backends runs f against a fresh memstore and a fresh SQLite store.
func backends(t *testing.T, f func(t *testing.T, st store.Store)) {
	t.Run("memstore", func(t *testing.T) { f(t, memstore.New()) })
	t.Run("sqlite", func(t *testing.T) { f(t, openSQLite(t, filepath.Join(t.TempDir(), "x.db"))) })
}

func openSQLite(t testing.TB, path string) store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func newService(t testing.TB, st store.Store, opts *Options) *Service {
	t.Helper()
	s, err := New(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func seedRequest(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "seed_dispatch.json"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// response is a recorded HTTP answer.
type response struct {
	Code   int
	Header http.Header
	Body   []byte
}

func (r response) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("status %d, body %q is not a JSON object: %v", r.Code, r.Body, err)
	}
	return m
}

func (r response) decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("status %d, body %q: %v", r.Code, r.Body, err)
	}
}

// do serves one request with the principal p (nil: none in the context).
func do(t testing.TB, h http.Handler, p *auth.Principal, method, path, body string, header ...string) response {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	if p != nil {
		req = req.WithContext(auth.WithPrincipal(req.Context(), *p))
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return response{Code: w.Code, Header: w.Header(), Body: w.Body.Bytes()}
}

// expectError checks an error answer: its status, status "error", and a
// hint holding every one of words.
func expectError(t testing.TB, r response, code int, words ...string) map[string]any {
	t.Helper()
	if r.Code != code {
		t.Fatalf("status %d, want %d; body %s", r.Code, code, r.Body)
	}
	m := r.json(t)
	if m["status"] != "error" {
		t.Errorf("error body has status %v, want \"error\": %s", m["status"], r.Body)
	}
	hint, _ := m["hint"].(string)
	if hint == "" {
		t.Fatalf("error body has no hint: %s", r.Body)
	}
	for _, w := range words {
		if !strings.Contains(hint, w) {
			t.Errorf("hint %q does not mention %q", hint, w)
		}
	}
	return m
}

func size(t testing.TB, st store.Store) int64 {
	t.Helper()
	n, err := st.LedgerSize(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func dispatchBody(key, body string) string {
	return `{"key":` + quote(key) + `,"body":` + body + `}`
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

const simpleRow = `{"type":"directory_row","command":"echo","description":"Say it.","args":[{"name":"word","type":"string","required":true}],"flags":[{"name":"n","type":"boolean","short_alias":"-n"}]}`
