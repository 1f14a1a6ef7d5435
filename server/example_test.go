package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/server"
	"github.com/asmp-dev/asmp/store/memstore"
	"github.com/asmp-dev/asmp/workflow"
)

// Define a workflow in Go, serve it from your own mux under a prefix, and
// drive it over HTTP.
func Example() {
	b := workflow.New("greeting-v1", "ASK").Description("Say hello.")
	b.State("ASK").Hint("Tell me your name.")
	b.State("DONE").Hint("Greeted.")
	b.Transition("ASK", "greet", "DONE").Expect("name", "string").
		Guard(func(data map[string]any) (bool, string) { return true, "" })
	def, err := b.Build()
	if err != nil {
		panic(err)
	}
	eng, _ := engine.New(memstore.New(), []*workflow.Definition{def}, nil)

	mux := http.NewServeMux()
	mux.Handle("/asmp/", http.StripPrefix("/asmp", server.New(eng, &server.Options{PublicURL: "https://example.com/asmp"})))
	ts := httptest.NewServer(mux)
	defer ts.Close()

	res, _ := http.Post(ts.URL+"/asmp/runs", "application/json", nil)
	var f struct {
		RunID      string `json:"run_id"`
		State      string `json:"state"`
		NextStates []struct {
			Action  string            `json:"action"`
			Href    string            `json:"href"`
			Expects map[string]string `json:"expects"`
		} `json:"next_states"`
	}
	json.NewDecoder(res.Body).Decode(&f)
	res.Body.Close()
	next := f.NextStates[0]
	fmt.Println(res.StatusCode, f.State, next.Action, next.Expects["name"])
	fmt.Println(strings.Replace(next.Href, f.RunID, "RUN", 1))

	res, _ = http.Post(ts.URL+"/asmp/runs/"+f.RunID+"/transitions/greet", "application/json", strings.NewReader(`{"name":"Ada"}`))
	var done struct {
		State  string         `json:"state"`
		Status string         `json:"status"`
		Data   map[string]any `json:"data"`
	}
	json.NewDecoder(res.Body).Decode(&done)
	res.Body.Close()
	fmt.Println(res.StatusCode, done.State, done.Status, done.Data["name"])

	run, _ := eng.GetRun(context.Background(), f.RunID)
	fmt.Println(run.Version)
	// Output:
	// 201 ASK greet string
	// https://example.com/asmp/runs/RUN/transitions/greet
	// 200 DONE completed Ada
	// 2
}
