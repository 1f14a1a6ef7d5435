package cli_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/server"
	"github.com/asmp-dev/asmp/store/memstore"
	"github.com/asmp-dev/asmp/workflow"
)

// gated-v1 leads from INITIAL to GATE, whose only way on is guarded by
// data the run does not have: at GATE the run is active and offers nothing.
const gatedWorkflow = `
workflow_id: gated-v1
initial_state: INITIAL
states:
  INITIAL: {hint: Start.}
  GATE: {hint: Wait for approval.}
  DONE: {hint: Done.}
transitions:
  - {from: INITIAL, action: start, to: GATE}
  - {from: GATE, action: go, to: DONE, guard: {expr: 'data.approved == true', reason: Not approved yet.}}
`

func gatedServer(t *testing.T) string {
	t.Helper()
	def, err := workflow.Load("gated.yaml", []byte(gatedWorkflow), nil)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(memstore.New(), []*workflow.Definition{def}, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(eng, nil)
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { srv.Shutdown(); ts.Close() })
	return ts.URL
}

// At a state where every action's guard refuses, the model is not sent an
// empty tool list (OpenAI-compatible servers refuse "tools": []): the
// drive stops with a hint that says why and how to go on.
func TestDriveStopsWhenNothingIsOffered(t *testing.T) {
	srv := gatedServer(t)
	m := newFakeModel(t, func(t testing.TB, r chatRequest) []string {
		if len(r.Tools) == 0 {
			t.Errorf("request %d sent no tools", len(r.Messages))
		}
		return call("start", `{}`)
	})
	code, out, errOut := drive(t, srv, m, "--workflow", "gated-v1", "--json")
	s := summaryOf(t, jsonLines(t, out))
	if code != 1 || s["outcome"] != "nothing_offered" || s["state"] != "GATE" || !strings.Contains(errOut, "offers no action now") || !strings.Contains(errOut, "asmp watch") {
		t.Fatalf("exit %d %v\n%s", code, s, errOut)
	}
	if n := len(m.requests()); n != 1 {
		t.Fatalf("%d model requests, want 1 (none at GATE)", n)
	}
}

// A model endpoint that refuses the request: drive prints the API's error
// message (or body), not only the status, and never the key.
func TestDriveShowsTheAPIError(t *testing.T) {
	srv := gatedServer(t)
	for name, body := range map[string]string{
		"openai": `{"error":{"message":"Invalid 'tools': empty array. Expected an array with minimum length 1 (key ` + testKey + `).","type":"invalid_request_error","param":"tools","code":"empty_array"}}`,
		"vllm":   `{"object":"error","message":"tools must not be empty (key ` + testKey + `)","type":"BadRequestError","code":400}`,
	} {
		t.Run(name, func(t *testing.T) {
			api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				w.Write([]byte(body))
			}))
			defer api.Close()
			code, out, errOut := drive(t, srv, &fakeModel{url: api.URL + "/v1"}, "--workflow", "gated-v1")
			if code != 1 || !strings.Contains(errOut, "400 Bad Request") || !strings.Contains(errOut, "empty") {
				t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
			}
			if strings.Contains(errOut+out, testKey) {
				t.Fatalf("the key was printed:\n%s", errOut)
			}
		})
	}
}
