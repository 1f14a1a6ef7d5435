package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/workflow"
)

func forEachBackend(t *testing.T, fn func(t *testing.T, e *env)) {
	for name, nb := range backends {
		t.Run(name, func(t *testing.T) {
			fn(t, start(t, setup{newStor: nb}))
		})
	}
}

// The config wizard driven exactly as the dynamic CLI seed describes, with
// the exact CLI object at every state.
func TestConfigWizardEndToEnd(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		// Discovery creates no run.
		before, _ := e.st.CountRuns(t.Context())
		d := frame(t, e.do("GET", "/", nil), 200)
		after, _ := e.st.CountRuns(t.Context())
		if fmt.Sprint(before) != fmt.Sprint(after) {
			t.Fatalf("GET / created a run: %v -> %v", before, after)
		}
		if len(d.NextStates) != 2 || d.NextStates[0].Action != "start:config-wizard-v1" || d.NextStates[0].Method != "POST" {
			t.Fatalf("discovery next_states = %+v", d.NextStates)
		}

		r := e.do("POST", "/runs", nil)
		f := frame(t, r, 201)
		if f.WorkflowID != "config-wizard-v1" || f.State != "INITIAL" || f.Status != "active" || f.Hint != "Start the config wizard." {
			t.Fatalf("initial frame = %+v", f)
		}
		if loc := r.header.Get("Location"); loc != e.url+"/runs/"+f.RunID {
			t.Fatalf("Location = %q", loc)
		}
		if r.header.Get("ETag") != `"1"` {
			t.Fatalf("ETag = %q, want \"1\"", r.header.Get("ETag"))
		}
		if f.ResourceURL != e.url || f.StreamURL != e.url+"/runs/"+f.RunID+"/stream" {
			t.Fatalf("urls: %q %q", f.ResourceURL, f.StreamURL)
		}
		id := f.RunID
		wantCLI := func(want protocol.CLI) {
			t.Helper()
			want.RunID = id
			for _, path := range []string{"/cli", "/cli.json"} {
				got := cliObj(t, e.do("GET", "/runs/"+id+path, nil))
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("GET %s =\n%+v\nwant\n%+v", path, got, want)
				}
			}
		}
		wantCLI(protocol.CLI{Prompt: "Config wizard", Hint: "Press 1 to start, or 2 to exit.",
			Options: []protocol.CLIOption{{Action: "start", Label: "Start wizard", Keys: "1"}, {Action: "exit", Label: "Exit", Keys: "2"}}})

		f = frame(t, e.fire(id, "start", nil), 200)
		if f.State != "CONFIGURE" || len(f.NextStates) != 1 || f.NextStates[0].Action != "save" ||
			!reflect.DeepEqual(f.NextStates[0].Expects, map[string]string{"value": "string"}) ||
			f.NextStates[0].Href != e.url+"/runs/"+id+"/transitions/save" {
			t.Fatalf("CONFIGURE frame = %+v", f)
		}
		wantCLI(protocol.CLI{Prompt: "Set value", Hint: "Enter your config value, then choose Save.", InputHint: "Value (string):",
			Options: []protocol.CLIOption{{Action: "save", Label: "Save", Keys: "enter"}}})

		// Follow the href the frame gave, as an agent would.
		f = frame(t, e.do("POST", f.NextStates[0].Href, map[string]any{"value": "dark-mode", "ignored": 1}), 200)
		if f.State != "CONFIRM" || f.Data["value"] != "dark-mode" || f.Data["ignored"] != nil {
			t.Fatalf("CONFIRM frame = %+v (only expects keys are merged)", f)
		}
		wantCLI(protocol.CLI{Prompt: "Apply configuration?", Hint: "Confirm to apply or cancel.",
			Options: []protocol.CLIOption{{Action: "confirm", Label: "Yes, apply", Keys: "y"}, {Action: "cancel", Label: "No, cancel", Keys: "n"}}})

		r = e.fire(id, "confirm", nil)
		f = frame(t, r, 200)
		if f.State != "DONE" || f.Status != "completed" || len(f.NextStates) != 0 || f.Hint != "Configuration applied." {
			t.Fatalf("DONE frame = %+v", f)
		}
		if r.header.Get("ETag") != `"4"` {
			t.Fatalf("ETag after 3 transitions = %q", r.header.Get("ETag"))
		}
		// No hook at DONE: generated object, no options.
		wantCLI(protocol.CLI{Prompt: "Choose an action", Hint: "Configuration applied."})

		evs := e.events(id)
		var got []string
		for _, ev := range evs {
			got = append(got, fmt.Sprintf("%v:%v>%v:%v", ev["id"], ev["from"], ev["to"], ev["action"]))
		}
		want := []string{"1:<nil>>INITIAL:<nil>", "2:INITIAL>CONFIGURE:start", "3:CONFIGURE>CONFIRM:save", "4:CONFIRM>DONE:confirm"}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("events = %v, want %v", got, want)
		}
		if evs[3]["actor"] != "anonymous" || evs[3]["status"] != "completed" {
			t.Fatalf("last event = %v", evs[3])
		}
		// The run is readable afterwards, unchanged.
		if g := frame(t, e.do("GET", "/runs/"+id, nil), 200); g.State != "DONE" || g.Data["value"] != "dark-mode" {
			t.Fatalf("GET after completion = %+v", g)
		}
	})
}

// mergeWorkflow has a hook whose options name an action that a guard hides
// and leaves out an action that is offered.
func mergeWorkflow(t *testing.T) *workflow.Definition {
	b := workflow.New("merge-v1", "PICK")
	b.State("PICK").Hint("Pick one.").CLI(workflow.CLIHook{Prompt: "Pick", Options: []workflow.CLIOption{
		{Action: "hidden", Label: "Hidden one", Keys: "h"},
		{Action: "second", Label: "Second one", Keys: "2"},
	}})
	b.State("NOHOOK").Hint("Type something.")
	b.State("END").Hint("Done.")
	b.Transition("PICK", "first", "NOHOOK")
	b.Transition("PICK", "second", "END")
	b.Transition("PICK", "hidden", "END").Guard(func(map[string]any) (bool, string) { return false, "never" })
	b.Transition("PICK", "third", "END")
	b.Transition("NOHOOK", "say", "END").Expect("value", "str")
	b.Transition("NOHOOK", "back", "PICK")
	d, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestCLIMergeAndGeneration(t *testing.T) {
	e := start(t, setup{defs: []*workflow.Definition{mergeWorkflow(t)}})
	f := e.startRun("")
	got := cliObj(t, e.do("GET", "/runs/"+f.RunID+"/cli", nil))
	want := protocol.CLI{Prompt: "Pick", Hint: "Pick one.", RunID: f.RunID, Options: []protocol.CLIOption{
		{Action: "second", Label: "Second one", Keys: "2"}, // hook order first
		{Action: "first", Label: "first"},                  // offered, no hook option: appended
		{Action: "third", Label: "third"},
	}} // "hidden" is not offered (guard): its hook option is dropped
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("merged CLI =\n%+v\nwant\n%+v", got, want)
	}
	if acts := f.Actions(); !reflect.DeepEqual(acts, []string{"first", "second", "third"}) {
		t.Fatalf("next_states = %v (declaration order, guard-refused omitted)", acts)
	}
	frame(t, e.fire(f.RunID, "first", nil), 200)
	got = cliObj(t, e.do("GET", "/runs/"+f.RunID+"/cli", nil))
	want = protocol.CLI{Prompt: "Choose an action", Hint: "Type something.", InputHint: "value (string):", RunID: f.RunID,
		Options: []protocol.CLIOption{{Action: "say", Label: "say"}, {Action: "back", Label: "back"}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("generated CLI =\n%+v\nwant\n%+v", got, want)
	}
	// A guard-refused action is a 403 with the guard's reason.
	frame(t, e.fire(f.RunID, "back", nil), 200)
	r := e.fire(f.RunID, "hidden", nil)
	if r.status != 403 || r.hint(t) != "never" {
		t.Fatalf("guarded action: %d %s", r.status, r.body)
	}
}

func TestErrorsCarryHintsAndWriteNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		f := e.startRun("")
		id := f.RunID
		frame(t, e.fire(id, "start", nil), 200) // CONFIGURE, version 2

		cases := []struct {
			name    string
			r       resp
			status  int
			inHint  string
			errCode string
		}{
			{"unknown run", e.do("GET", "/runs/0190f5a4-7b5e-7c3e-9d2a-1b2c3d4e5f60", nil), 404, "Run not found", "not_found"},
			{"unknown run cli", e.do("GET", "/runs/nope/cli", nil), 404, "Run not found", "not_found"},
			{"unknown run transition", e.fire("nope", "start", nil), 404, "Run not found", "not_found"},
			{"action not offered", e.fire(id, "confirm", map[string]any{}), 403, "Offered actions: save", "forbidden"},
			{"unknown action", e.fire(id, "explode", nil), 403, "not available in state CONFIGURE", "forbidden"},
			{"not offered beats bad body", e.fire(id, "confirm", "{oops"), 403, "Offered actions: save", "forbidden"},
			{"malformed JSON", e.fire(id, "save", `{"value": "x"`), 400, "not valid JSON", "invalid"},
			{"non-object body", e.fire(id, "save", `["value"]`), 400, "must be a JSON object", "invalid"},
			{"string body", e.fire(id, "save", `"x"`), 400, "must be a JSON object", "invalid"},
			{"trailing data", e.fire(id, "save", `{"value":"x"} {}`), 400, "after its JSON value", "invalid"},
			{"missing expects key", e.fire(id, "save", map[string]any{"other": "x"}), 400, `Missing field "value"`, "invalid"},
			{"wrong type", e.fire(id, "save", map[string]any{"value": 42}), 400, `"value" must be a string, got integer`, "invalid"},
			{"null value", e.fire(id, "save", map[string]any{"value": nil}), 400, `"value" must be a string, got null`, "invalid"},
			{"too deep", e.fire(id, "save", strings.Repeat("[", 100)+strings.Repeat("]", 100)), 400, "nesting", "invalid"},
			{"oversized", e.fire(id, "save", `{"value":"`+strings.Repeat("x", 2<<20)+`"}`), 413, "larger than the limit", "too_large"},
			{"stale If-Match", e.do("POST", "/runs/"+id+"/transitions/save", map[string]any{"value": "x"}, "If-Match", `"1"`), 409, "changed since you read it", "conflict"},
			{"bad If-Match", e.do("POST", "/runs/"+id+"/transitions/save", map[string]any{"value": "x"}, "If-Match", `banana`), 400, "If-Match", "invalid"},
			{"unknown workflow", e.do("POST", "/runs", map[string]any{"workflow_id": "nope-v1"}), 404, "Workflow not found", "not_found"},
			{"unknown field on POST /runs", e.do("POST", "/runs", map[string]any{"workflow": "x"}), 400, "Unknown field", "invalid"},
			{"bad data on POST /runs", e.do("POST", "/runs", map[string]any{"data": []int{1}}), 400, "data must be a JSON object", "invalid"},
			{"unknown path", e.do("GET", "/nope", nil), 404, "No endpoint", "not_found"},
			{"wrong method", e.do("DELETE", "/runs/"+id, nil), 405, "not allowed", "method_not_allowed"},
			{"tool not bound", e.do("POST", "/runs/"+id+"/invoke/policy_check", map[string]any{}), 403, "not available in state CONFIGURE", "forbidden"},
			{"resource not bound", e.do("GET", "/runs/"+id+"/resources/policy", nil), 403, "not available in state CONFIGURE", "forbidden"},
			{"unknown skill", e.do("GET", "/skills/nope.md", nil), 404, "Skill not found", "not_found"},
		}
		for _, c := range cases {
			if c.r.status != c.status {
				t.Errorf("%s: status %d, want %d: %s", c.name, c.r.status, c.status, c.r.body)
				continue
			}
			if h := c.r.hint(t); !strings.Contains(h, c.inHint) {
				t.Errorf("%s: hint %q does not contain %q", c.name, h, c.inHint)
			}
			if code := c.r.json(t)["error"]; code != c.errCode {
				t.Errorf("%s: error code %v, want %s", c.name, code, c.errCode)
			}
		}
		// The 403 names the state and the offered actions.
		m := e.fire(id, "confirm", nil).json(t)
		if m["state"] != "CONFIGURE" || fmt.Sprint(m["allowed"]) != "[save]" {
			t.Errorf("403 body = %v", m)
		}
		// Nothing was written by any refused request.
		g := e.do("GET", "/runs/"+id, nil)
		if f := frame(t, g, 200); f.State != "CONFIGURE" || len(f.Data) != 0 || g.header.Get("ETag") != `"2"` {
			t.Fatalf("run changed by refused requests: %+v etag %s", f, g.header.Get("ETag"))
		}
		if n := len(e.events(id)); n != 2 {
			t.Fatalf("event log has %d events after refused requests, want 2", n)
		}
		// The right If-Match is accepted.
		frame(t, e.do("POST", "/runs/"+id+"/transitions/save", map[string]any{"value": "x"}, "If-Match", `"2"`), 200)
	})
}

// 50 goroutines race confirm and cancel on one run: exactly one wins.
func TestRacingTransitionsExactlyOneWins(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		id := e.startRun("").RunID
		frame(t, e.fire(id, "start", nil), 200)
		frame(t, e.fire(id, "save", map[string]any{"value": "v"}), 200)
		const n = 50
		var wg sync.WaitGroup
		results := make([]resp, n)
		gate := make(chan struct{})
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				<-gate
				action := "confirm"
				if i%2 == 1 {
					action = "cancel"
				}
				results[i] = e.fire(id, action, nil)
			}(i)
		}
		close(gate)
		wg.Wait()
		wins := 0
		for _, r := range results {
			switch r.status {
			case 200:
				wins++
			case 403:
				if h := r.hint(t); !strings.Contains(h, "not available") {
					t.Errorf("loser hint = %q", h)
				}
			default:
				t.Errorf("unexpected status %d: %s", r.status, r.body)
			}
		}
		if wins != 1 {
			t.Fatalf("%d requests won, want exactly 1", wins)
		}
		if evs := e.events(id); len(evs) != 4 {
			t.Fatalf("%d events, want 4", len(evs))
		}
	})
}

func loopWorkflow(t *testing.T) *workflow.Definition {
	d, err := workflow.Load("loop.yaml", []byte(`
workflow_id: loop-v1
initial_state: LOOP
states:
  LOOP: {hint: Tick as often as you like.}
transitions:
  - {from: LOOP, action: tick, to: LOOP}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// 50 goroutines tick a self-loop: every tick lands, in a gap-free log.
func TestConcurrentSelfLoopAllSucceed(t *testing.T) {
	for name, nb := range backends {
		t.Run(name, func(t *testing.T) {
			e := start(t, setup{defs: []*workflow.Definition{loopWorkflow(t)}, newStor: nb})
			id := e.startRun("").RunID
			const n = 50
			var wg sync.WaitGroup
			statuses := make(chan int, n)
			for i := 0; i < n; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					statuses <- e.fire(id, "tick", nil).status
				}()
			}
			wg.Wait()
			close(statuses)
			for s := range statuses {
				if s != 200 {
					t.Fatalf("a tick got %d", s)
				}
			}
			evs := e.events(id)
			if len(evs) != n+1 {
				t.Fatalf("%d events, want %d", len(evs), n+1)
			}
			for i, ev := range evs {
				if int(ev["id"].(float64)) != i+1 {
					t.Fatalf("event %d has id %v", i, ev["id"])
				}
			}
			if r := e.do("GET", "/runs/"+id, nil); r.header.Get("ETag") != fmt.Sprintf(`"%d"`, n+1) {
				t.Fatalf("ETag = %s", r.header.Get("ETag"))
			}
		})
	}
}

func TestScopedAPI(t *testing.T) {
	e := start(t, setup{})
	d := frame(t, e.do("GET", "/w/expense-approval-v1/", nil), 200)
	if len(d.NextStates) != 1 || d.NextStates[0].Href != e.url+"/w/expense-approval-v1/runs" || d.WorkflowID != "expense-approval-v1" {
		t.Fatalf("scoped discovery = %+v", d)
	}
	frame(t, e.do("GET", "/w/expense-approval-v1", nil), 200)
	// Following the discovery href creates a run of that workflow.
	r := e.do("POST", d.NextStates[0].Href, nil)
	f := frame(t, r, 201)
	base := e.url + "/w/expense-approval-v1"
	if f.WorkflowID != "expense-approval-v1" || f.State != "SUBMIT" || f.ResourceURL != base || !strings.HasPrefix(f.NextStates[0].Href, base+"/runs/") {
		t.Fatalf("scoped run frame = %+v", f)
	}
	if r.header.Get("Location") != base+"/runs/"+f.RunID {
		t.Fatalf("Location = %s", r.header.Get("Location"))
	}
	// The run is visible at the root and under its own workflow, not another's.
	frame(t, e.do("GET", "/runs/"+f.RunID, nil), 200)
	frame(t, e.do("GET", "/w/expense-approval-v1/runs/"+f.RunID, nil), 200)
	if r := e.do("GET", "/w/config-wizard-v1/runs/"+f.RunID, nil); r.status != 404 || !strings.Contains(r.hint(t), "does not belong") {
		t.Fatalf("cross-workflow read: %d %s", r.status, r.body)
	}
	if r := e.do("POST", "/w/config-wizard-v1/runs/"+f.RunID+"/transitions/submit", map[string]any{"amount": 1, "description": "x"}); r.status != 404 || !strings.Contains(r.hint(t), "does not belong") {
		t.Fatalf("cross-workflow transition: %d %s", r.status, r.body)
	}
	if r := e.do("POST", "/w/config-wizard-v1/runs/"+f.RunID+"/invoke/policy_check", map[string]any{"amount": 1}); r.status != 404 || !strings.Contains(r.hint(t), "does not belong") {
		t.Fatalf("cross-workflow tool: %d %s", r.status, r.body)
	}
	for _, path := range []string{"/cli", "/cli.json", "/events"} {
		if r := e.do("GET", "/w/config-wizard-v1/runs/"+f.RunID+path, nil); r.status != 404 || !strings.Contains(r.hint(t), "does not belong") {
			t.Fatalf("GET %s of a run of another workflow: %d %s", path, r.status, r.body)
		}
	}
	if r := e.do("GET", "/w/config-wizard-v1/runs/"+f.RunID+"/resources/policy", nil); r.status != 404 || !strings.Contains(r.hint(t), "does not belong") {
		t.Fatalf("cross-workflow resource: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/w/expense-approval-v1/runs/"+f.RunID+"/resources/policy", nil); r.status != 200 {
		t.Fatalf("scoped resource: %d %s", r.status, r.body)
	}
	if g := frame(t, e.do("GET", "/runs/"+f.RunID, nil), 200); g.State != "SUBMIT" {
		t.Fatalf("a refused cross-workflow transition moved the run to %s", g.State)
	}
	if r := e.do("POST", "/w/config-wizard-v1/runs", map[string]any{"workflow_id": "expense-approval-v1"}); r.status != 400 {
		t.Fatalf("mismatched workflow_id: %d", r.status)
	}
	if r := e.do("GET", "/w/nope-v1/", nil); r.status != 404 || !strings.Contains(r.hint(t), "Workflow not found") {
		t.Fatalf("unknown scoped workflow: %d %s", r.status, r.body)
	}
	cli := cliObj(t, e.do("GET", "/w/expense-approval-v1/runs/"+f.RunID+"/cli", nil))
	if cli.Prompt != "New expense claim" {
		t.Fatalf("scoped cli = %+v", cli)
	}
	var cat struct {
		Workflows []map[string]any `json:"workflows"`
	}
	json.Unmarshal(e.do("GET", "/workflows", nil).body, &cat)
	if len(cat.Workflows) != 2 || cat.Workflows[0]["workflow_id"] != "config-wizard-v1" || cat.Workflows[0]["initial_state"] != "INITIAL" ||
		cat.Workflows[0]["start_href"] != e.url+"/w/config-wizard-v1/runs" || len(cat.Workflows[0]["states"].([]any)) != 5 ||
		cat.Workflows[0]["default"] != true || cat.Workflows[1]["default"] != false {
		t.Fatalf("catalog = %+v", cat)
	}
}

func TestToolsResourcesGuardsSkills(t *testing.T) {
	e := start(t, setup{})
	f := e.startRun("expense-approval-v1")
	id := f.RunID
	if f.Status != "awaiting_input" || f.ActiveSkill == nil || f.ActiveSkill.URL != e.url+"/skills/expense/SKILL.md" || len(f.Tools) != 1 || len(f.Resources) != 1 {
		t.Fatalf("SUBMIT frame = %+v", f)
	}
	if f.Tools[0].Href != e.url+"/runs/"+id+"/invoke/policy_check" || f.Resources[0].URI != e.url+"/runs/"+id+"/resources/policy" {
		t.Fatalf("tool/resource links: %+v %+v", f.Tools, f.Resources)
	}
	skill := e.do("GET", strings.TrimPrefix(f.ActiveSkill.URL, e.url), nil)
	if skill.status != 200 || !strings.Contains(string(skill.body), "# Expense claims") || !strings.HasPrefix(skill.header.Get("Content-Type"), "text/markdown") {
		t.Fatalf("skill: %d %s", skill.status, skill.header.Get("Content-Type"))
	}
	res := e.do("GET", "/runs/"+id+"/resources/policy", nil)
	if res.status != 200 || res.header.Get("Content-Type") != "text/markdown" || !strings.Contains(string(res.body), "Expense policy") {
		t.Fatalf("resource: %d %q", res.status, res.header.Get("Content-Type"))
	}
	tool := e.do("POST", "/runs/"+id+"/invoke/policy_check", map[string]any{"amount": 2500})
	if tool.status != 200 || !strings.Contains(string(tool.body), `"route":"escalate"`) {
		t.Fatalf("tool: %d %s", tool.status, tool.body)
	}
	if r := e.do("POST", "/runs/"+id+"/invoke/policy_check", map[string]any{"amount": "lots"}); r.status != 400 || !strings.Contains(r.hint(t), `"amount" must be a number`) {
		t.Fatalf("tool with a bad input: %d %s", r.status, r.body)
	}
	if r := e.do("POST", "/runs/"+id+"/invoke/policy_check", map[string]any{"amount": -1}); r.status != 400 || !strings.Contains(r.hint(t), "positive") {
		t.Fatalf("tool error: %d %s", r.status, r.body)
	}
	if r := e.do("POST", "/runs/"+id+"/invoke/nope", map[string]any{}); r.status != 403 || !strings.Contains(r.hint(t), "Tools here: policy_check") {
		t.Fatalf("unknown tool: %d %s", r.status, r.body)
	}
	f = frame(t, e.fire(id, "submit", map[string]any{"amount": 2500, "description": "A laptop"}), 200)
	if f.State != "REVIEW" || !reflect.DeepEqual(f.Actions(), []string{"escalate", "reject", "escalate_to_manager"}) || !reflect.DeepEqual(f.Milestones, []string{"Claim submitted"}) {
		t.Fatalf("REVIEW frame for a large claim = %+v", f)
	}
	if !f.NextStates[1].IsCritical {
		t.Fatalf("reject should be critical: %+v", f.NextStates[1])
	}
	r := e.fire(id, "approve", nil)
	if r.status != 403 || !strings.Contains(r.hint(t), "cannot be approved directly: escalate") {
		t.Fatalf("guarded approve: %d %s", r.status, r.body)
	}
	claim := e.do("GET", "/runs/"+id+"/resources/claim", nil)
	if claim.status != 200 || string(claim.body) != `{"amount":2500,"description":"A laptop"}` || claim.header.Get("Content-Type") != "application/json" {
		t.Fatalf("claim resource: %d %s", claim.status, claim.body)
	}
	cli := cliObj(t, e.do("GET", "/runs/"+id+"/cli", nil))
	if len(cli.Options) != 3 || cli.Options[0].Action != "escalate" || cli.Options[1].Action != "reject" || cli.Options[2].Action != "escalate_to_manager" {
		t.Fatalf("CLI drops the guarded option: %+v", cli.Options)
	}
	f = frame(t, e.fire(id, "escalate", nil), 200)
	if f.State != "FINANCE_REVIEW" || len(f.Milestones) != 2 {
		t.Fatalf("escalated: %+v", f)
	}
}

func TestOpenAPIAndHealth(t *testing.T) {
	e := start(t, setup{})
	r := e.do("GET", "/openapi.json", nil)
	m := r.json(t)
	servers := m["servers"].([]any)
	if servers[0].(map[string]any)["url"] != e.url {
		t.Fatalf("servers[0] = %v", servers[0])
	}
	paths := m["paths"].(map[string]any)
	for _, p := range []string{"/", "/runs", "/runs/{run_id}", "/runs/{run_id}/cli", "/runs/{run_id}/transitions/{action}", "/workflows", "/runs/{run_id}/events", "/api/dispatch", "/healthz"} {
		if paths[p] == nil {
			t.Errorf("openapi lacks %s", p)
		}
	}
	scoped := e.do("GET", "/w/config-wizard-v1/openapi.json", nil).json(t)
	if scoped["servers"].([]any)[0].(map[string]any)["url"] != e.url+"/w/config-wizard-v1" {
		t.Fatalf("scoped servers = %v", scoped["servers"])
	}
	if h := e.do("GET", "/healthz", nil); h.status != 200 {
		t.Fatalf("healthz %d", h.status)
	}
	if h := e.do("GET", "/readyz", nil); h.status != 200 {
		t.Fatalf("readyz %d", h.status)
	}
}

func TestPublicURLAndProxyHeaders(t *testing.T) {
	e := start(t, setup{opts: nil})
	f := frame(t, e.do("POST", "/runs", nil, "X-Forwarded-Host", "evil.example", "X-Forwarded-Proto", "https"), 201)
	if f.ResourceURL != e.url {
		t.Fatalf("untrusted proxy headers were used: %s", f.ResourceURL)
	}
	p := start(t, setup{opts: &serverOptsTrust})
	f = frame(t, p.do("POST", "/runs", nil, "X-Forwarded-Host", "asmp.example.com", "X-Forwarded-Proto", "https"), 201)
	if f.ResourceURL != "https://asmp.example.com" {
		t.Fatalf("trusted proxy: %s", f.ResourceURL)
	}
	q := start(t, setup{opts: &serverOptsPublic})
	r := q.do("POST", "/runs", nil)
	f = frame(t, r, 201)
	if f.ResourceURL != "https://api.example.com/asmp" || r.header.Get("Location") != "https://api.example.com/asmp/runs/"+f.RunID {
		t.Fatalf("public url: %s %s", f.ResourceURL, r.header.Get("Location"))
	}
	_ = http.StatusOK
}
