package cli

// asmp drive: a language model drives a run to its end through an
// OpenAI-compatible Chat Completions endpoint, one tool per offered action.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/spf13/cobra"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/internal/app/tui"
	"github.com/asmp-dev/asmp/protocol"
)

func init() { register(newDriveCmd) }

// Drive defaults and bounds.
const (
	defaultDriveSteps = 20
	// maxPromptDoc caps one skill or resource read into the system prompt.
	maxPromptDoc = 16 << 10
	// llmTimeout bounds one model request (local models can be slow).
	llmTimeout = 5 * time.Minute
)

// Outcomes of a drive, in its summary.
const (
	outcomeCompleted = "completed"       // the run completed
	outcomeFailed    = "failed"          // the run ended failed
	outcomeBudget    = "step_budget"     // --max-steps ran out first
	outcomeConfirm   = "confirm"         // a critical action needs a person
	outcomeStopped   = "stopped"         // the model answered without a tool call
	outcomeNothing   = "nothing_offered" // the run is active but offers no action now
)

type driveOptions struct {
	model, llmURL, workflowID, runID, goal, transcript string
	maxSteps                                           int
	yes, json                                          bool
}

func newDriveCmd(env *Env) *cobra.Command {
	var o driveOptions
	cmd := &cobra.Command{
		Use:   "drive [URL] --model NAME",
		Short: "Let a language model drive a run to its end",
		Long: `Start a run of --workflow (or take --run RUN_ID) and let a language model
drive it through an OpenAI-compatible Chat Completions endpoint
(POST {llm-url}/chat/completions with tools): hosted models, Ollama, vLLM,
llama.cpp's server and LM Studio all speak it.

At every step the model gets a system prompt with the workflow's active
skill, the state's hint and data, and the stage resources the skill or hint
names, plus --goal (what you want done) as the user's message. Each offered
action is a tool named by the action, whose parameters are the JSON Schema
of what it expects (a number is a number); stage tools are offered as
tool_<name>. A refused call (wrong type, not offered, guard) goes back to the
model with the server's hint, and it tries again. A processing state is
waited out on the run's stream, with a progress bar on stderr.

An action marked is_critical is fired only with --yes; without it the drive
asks on a terminal, and otherwise stops and says that a person must confirm.

The model endpoint is --llm-url, else $ASMP_LLM_URL (for Ollama:
http://localhost:11434/v1), else https://api.openai.com/v1; the key is
$ASMP_LLM_KEY, else $OPENAI_API_KEY (none for most local servers). The ASMP
server is URL, else $ASMP_URL, else the --run's remembered server, else
http://127.0.0.1:8000; its token is $ASMP_TOKEN. Keys and tokens are never printed or written.

Exit status 0 when the run completed; 1 when it failed, the step budget ran
out, a person must confirm, or the model stopped calling tools first.`,
		Example: `  asmp drive http://127.0.0.1:8000 --workflow config-wizard-v1 \
      --llm-url http://localhost:11434/v1 --model qwen2.5:7b --goal 'set the value to "dark mode"'
  OPENAI_API_KEY=sk-… asmp drive http://127.0.0.1:8000 --workflow expense-approval-v1 \
      --model gpt-4o-mini --goal 'file 120 EUR for a taxi to the airport' --json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDrive(cmd.Context(), env, cmd.OutOrStdout(), args, o)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.model, "model", "", "the model to ask (required), e.g. gpt-4o-mini or qwen2.5:7b")
	fl.StringVar(&o.llmURL, "llm-url", "", "base URL of the Chat Completions API (default: $ASMP_LLM_URL, else https://api.openai.com/v1)")
	fl.StringVar(&o.workflowID, "workflow", "", "workflow of the new run (default: the server's default)")
	fl.StringVar(&o.runID, "run", "", "drive this existing run instead of starting one")
	fl.StringVar(&o.goal, "goal", "", "what you want done, told to the model (e.g. the value to set, the expense to file)")
	fl.IntVar(&o.maxSteps, "max-steps", defaultDriveSteps, "the most model requests to make")
	fl.BoolVar(&o.yes, "yes", false, "let the model fire critical actions (is_critical) without asking")
	fl.BoolVar(&o.json, "json", false, "print one JSON object per step and a final summary (NDJSON, see docs/CLI_JSON.md)")
	fl.StringVar(&o.transcript, "transcript", "", "write the prompts, tool calls and answers to FILE (JSON lines; never keys)")
	return cmd
}

func runDrive(ctx context.Context, env *Env, out io.Writer, args []string, o driveOptions) error {
	getenv := agentGetenv(env)
	if o.model == "" {
		return errors.New("no model: give --model NAME (e.g. --model gpt-4o-mini, or an Ollama model such as qwen2.5:7b)")
	}
	if o.maxSteps < 1 {
		return fmt.Errorf("--max-steps %d: give at least 1", o.maxSteps)
	}
	if o.runID != "" && o.workflowID != "" {
		return errors.New("--run drives an existing run; --workflow only chooses the workflow of a new one: give one of them")
	}
	llmURL := o.llmURL
	if llmURL == "" {
		llmURL = getenv("ASMP_LLM_URL")
	}
	key := getenv("ASMP_LLM_KEY")
	if key == "" {
		key = getenv("OPENAI_API_KEY")
	}
	if llmURL == "" && key == "" {
		return errors.New("no model endpoint: give --llm-url (for Ollama: http://localhost:11434/v1) or set ASMP_LLM_URL, or set OPENAI_API_KEY to use api.openai.com")
	}
	if llmURL == "" {
		llmURL = "https://api.openai.com/v1"
	}
	server := ""
	if len(args) == 1 {
		server = args[0]
		if b, id, ok := splitRunURL(server); ok {
			if o.runID != "" && o.runID != id {
				return fmt.Errorf("the URL names run %s but --run says %s", id, o.runID)
			}
			server, o.runID = b, id
		}
	}
	// The one rule of every client command: the URL, else $ASMP_URL, else
	// the --run's remembered server, else the default.
	server = serverFor(env, server, o.runID)
	c, err := agentClient(env, server)
	if err != nil {
		return err
	}
	d := &driver{
		env: env, out: out, errw: env.Stderr, o: o, c: c,
		llm: newLLM(llmURL, key), llmURL: llmURL, llmKey: key,
		skills: map[string]string{},
	}
	if d.errw == nil {
		d.errw = io.Discard
	}
	if o.transcript != "" {
		f, err := os.OpenFile(o.transcript, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			return fmt.Errorf("--transcript: %w", err)
		}
		defer f.Close()
		d.transcript = json.NewEncoder(f)
		d.transcript.SetEscapeHTML(false)
	}
	return d.run(ctx)
}

// newLLM returns a Chat Completions client of base with key ("" = none).
// The environment's OPENAI_BASE_URL and key are overridden by these.
func newLLM(base, key string) openai.Client {
	return openai.NewClient(
		option.WithBaseURL(strings.TrimRight(base, "/")+"/"),
		option.WithAPIKey(key),
		option.WithRequestTimeout(llmTimeout),
		option.WithMaxRetries(2),
	)
}

// driver is one drive of one run.
type driver struct {
	env        *Env
	out, errw  io.Writer
	o          driveOptions
	c          *client.Client
	llm        openai.Client
	llmURL     string
	llmKey     string // only to keep it out of error messages
	transcript *json.Encoder
	skills     map[string]string // skill URL -> text

	frame    *client.RunFrame
	messages []openai.ChatCompletionMessageParamUnion
	steps    int
	tokens   driveTokens
}

type driveTokens struct {
	Prompt     int64 `json:"prompt"`
	Completion int64 `json:"completion"`
	Total      int64 `json:"total"`
}

// driveStep is one --json line of kind "step": a tool call and its outcome.
type driveStep struct {
	Type      string         `json:"type"` // "step"
	Step      int            `json:"step"`
	Tool      string         `json:"tool"`
	Kind      string         `json:"kind,omitempty"`   // action or tool
	Target    string         `json:"target,omitempty"` // the action or stage tool
	Arguments any            `json:"arguments"`
	OK        bool           `json:"ok"`
	From      string         `json:"from"`
	State     string         `json:"state"`
	Status    string         `json:"status"`
	Result    any            `json:"result,omitempty"` // a stage tool's result
	Error     map[string]any `json:"error,omitempty"`  // a refusal: status, code, hint
	Tokens    int64          `json:"tokens"`           // used by this step's model request
}

// driveSummary is the last --json line (kind "summary").
type driveSummary struct {
	Type       string      `json:"type"` // "summary"
	RunID      string      `json:"run_id"`
	WorkflowID string      `json:"workflow_id"`
	State      string      `json:"state"`
	Status     string      `json:"status"`
	Outcome    string      `json:"outcome"`
	Steps      int         `json:"steps"`
	Tokens     driveTokens `json:"tokens"`
	Hint       string      `json:"hint"`
	// Confirm names the critical action a person must confirm
	// (outcome "confirm").
	Confirm *driveConfirm `json:"confirm,omitempty"`
}

type driveConfirm struct {
	Action    string `json:"action"`
	Arguments any    `json:"arguments"`
	Command   string `json:"command"` // the asmp step that fires it
}

func (d *driver) emit(v any) {
	if d.o.json {
		enc := json.NewEncoder(d.out)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(v)
	}
}

func (d *driver) printf(format string, args ...any) {
	if !d.o.json {
		fmt.Fprintf(d.out, format, args...)
	}
}

func (d *driver) record(kind string, v any) {
	if d.transcript != nil {
		_ = d.transcript.Encode(map[string]any{"step": d.steps, kind: v})
	}
}

func (d *driver) run(ctx context.Context) error {
	var err error
	if d.o.runID != "" {
		d.frame, err = d.c.Frame(ctx, d.o.runID)
	} else {
		d.frame, err = d.c.StartRun(ctx, d.o.workflowID, nil)
	}
	if err != nil {
		return err
	}
	agentRemember(d.env, d.c.BaseURL(), d.frame)
	d.printf("Run %s (%s) at %s [%s], driven by %s.\n", d.frame.RunID, d.frame.WorkflowID, d.frame.State, d.frame.Status, d.o.model)
	goal := d.o.goal
	if goal == "" {
		goal = "Take the run to its end, choosing what the skill and the hints advise."
	}
	d.messages = []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(""), openai.UserMessage("Goal: " + goal)}
	for {
		if err := d.waitProcessing(ctx); err != nil {
			return err
		}
		if protocol.Terminal(d.frame.Status) {
			outcome := outcomeCompleted
			if d.frame.Status == protocol.StatusFailed {
				outcome = outcomeFailed
			}
			return d.finish(outcome, nil)
		}
		if d.steps >= d.o.maxSteps {
			return d.finish(outcomeBudget, nil)
		}
		stop, err := d.step(ctx)
		if err != nil || stop != nil {
			if err != nil {
				return err
			}
			return d.finish(stop.outcome, stop.confirm)
		}
	}
}

// stopped is why a step ended the drive.
type stopped struct {
	outcome string
	confirm *driveConfirm
}

// step asks the model once and fires its tool calls.
func (d *driver) step(ctx context.Context) (*stopped, error) {
	cli, err := d.c.CLI(ctx, d.frame.RunID)
	if err != nil {
		return nil, err
	}
	cons, err := d.c.Constraints(ctx, d.frame.Frame)
	if err != nil {
		fmt.Fprintf(d.errw, "asmp: the run's workflow version could not be read, so the tools lack the fields' bounds: %v\n", err)
	}
	defs, err := client.ToolsWithConstraints(d.frame.Frame, cli, cons)
	if err != nil {
		fmt.Fprintf(d.errw, "asmp: %v\n", err) // the list is complete; the names say which is which
	}
	if len(defs) == 0 {
		// Every action is refused by its guard (or reserved by a task):
		// an empty tool list is refused by OpenAI-compatible servers, and
		// a model without tools could only talk.
		return &stopped{outcome: outcomeNothing}, nil
	}
	system, err := d.systemPrompt(ctx)
	if err != nil {
		return nil, err
	}
	d.messages[0] = openai.SystemMessage(system)
	tools := make([]openai.ChatCompletionToolUnionParam, len(defs))
	for i, t := range defs {
		tools[i] = openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
			Name: t.Name, Description: openai.String(t.Description), Parameters: openai.FunctionParameters(t.Parameters),
		})
	}
	params := openai.ChatCompletionNewParams{Model: d.o.model, Messages: d.messages, Tools: tools,
		ToolChoice: openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}}
	d.steps++
	d.record("request", params)
	resp, err := d.llm.Chat.Completions.New(ctx, params)
	if err != nil {
		return nil, d.llmError(err)
	}
	if raw := resp.RawJSON(); json.Valid([]byte(raw)) {
		d.record("response", json.RawMessage(raw))
	}
	used := resp.Usage.TotalTokens
	d.tokens.Prompt += resp.Usage.PromptTokens
	d.tokens.Completion += resp.Usage.CompletionTokens
	d.tokens.Total += used
	if len(resp.Choices) == 0 {
		return nil, fmt.Errorf("the model at %s answered no choices", d.llmURL)
	}
	msg := resp.Choices[0].Message
	d.messages = append(d.messages, msg.ToParam())
	if len(msg.ToolCalls) == 0 {
		d.printf("The model stopped without calling a tool: %s\n", oneLine(msg.Content, 300))
		return &stopped{outcome: outcomeStopped}, nil
	}
	for i, tc := range msg.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			d.answer(tc.ID, map[string]any{"error": "unsupported", "hint": "Only function tools exist here."})
			continue
		}
		if protocol.Terminal(d.frame.Status) || d.frame.Status == protocol.StatusProcessing {
			// An earlier call of this answer ended the run or started a
			// task: the rest were chosen for a state that is gone.
			d.answer(tc.ID, map[string]any{"error": "skipped", "hint": "Not called: the run moved on to " + d.frame.State + " before this call."})
			continue
		}
		stop, err := d.call(ctx, tc.ID, tc.Function.Name, tc.Function.Arguments, used)
		used = 0 // the request's tokens count on its first call
		if err != nil || stop != nil {
			for _, rest := range msg.ToolCalls[i+1:] {
				d.answer(rest.ID, map[string]any{"error": "skipped", "hint": "Not called: the drive stopped."})
			}
			return stop, err
		}
	}
	return nil, nil
}

// llmError describes a failed model request: for an answer with an error
// status, the status and what the API said (its error message, else the
// start of its body), with the API key masked should it be echoed.
func (d *driver) llmError(err error) error {
	var ae *openai.Error
	if !errors.As(err, &ae) {
		return fmt.Errorf("the model at %s did not answer: %w", d.llmURL, err)
	}
	said := ae.Message
	if said == "" && ae.Response != nil && ae.Response.Body != nil {
		b, _ := io.ReadAll(io.LimitReader(ae.Response.Body, 4<<10))
		said = string(b)
	}
	if d.llmKey != "" {
		said = strings.ReplaceAll(said, d.llmKey, "***")
	}
	said = oneLine(strings.TrimSpace(said), 500)
	if said == "" {
		said = "(no error message)"
	}
	return fmt.Errorf("the model at %s refused the request: %d %s: %s", d.llmURL, ae.StatusCode, http.StatusText(ae.StatusCode), said)
}

// answer sends v back to the model as the result of tool call id.
func (d *driver) answer(id string, v any) {
	b, _ := json.Marshal(v)
	d.messages = append(d.messages, openai.ToolMessage(string(b), id))
	d.record("tool_result", map[string]any{"tool_call_id": id, "content": json.RawMessage(b)})
}

// call fires one tool call of the model.
func (d *driver) call(ctx context.Context, id, name, arguments string, tokens int64) (*stopped, error) {
	from := d.frame.State
	var args any = map[string]any{}
	if a, err := protocol.DecodeValue([]byte(arguments), 0); err == nil && strings.TrimSpace(arguments) != "" {
		args = a
	} else if strings.TrimSpace(arguments) != "" {
		args = arguments
	}
	d.record("tool_call", map[string]any{"id": id, "name": name, "arguments": args})
	st := driveStep{Type: "step", Step: d.steps, Tool: name, Arguments: args, From: from, Tokens: tokens}
	defs, _ := client.Tools(d.frame.Frame)
	for _, t := range defs {
		if t.Name == name {
			st.Kind, st.Target = t.Kind, t.Target
			if t.IsCritical && !d.o.yes && !d.confirm(t, arguments) {
				st.State, st.Status = d.frame.State, d.frame.Status
				st.Error = map[string]any{"code": "needs_confirmation", "hint": fmt.Sprintf("Action %q is critical: a person must confirm it.", t.Target)}
				d.emit(st)
				d.answer(id, st.Error)
				return &stopped{outcome: outcomeConfirm, confirm: &driveConfirm{Action: t.Target, Arguments: args,
					Command: fmt.Sprintf("asmp step %s --action %s %s", d.frame.RunID, t.Target, shellQuote(arguments))}}, nil
			}
		}
	}
	res, err := d.c.Call(ctx, d.frame.Frame, name, json.RawMessage(arguments))
	if err != nil {
		var ce *client.Error
		if !errors.As(err, &ce) {
			return nil, err // the server is not reachable: no model can fix that
		}
		st.State, st.Status = d.frame.State, d.frame.Status
		st.Error = map[string]any{"status": ce.Status, "code": ce.Code, "hint": ce.Hint}
		if a := ce.Allowed(); len(a) > 0 {
			st.Error["allowed"] = a
		}
		d.emit(st)
		d.printf("%2d. %s %s refused (%d): %s\n", d.steps, name, oneLine(arguments, 200), ce.Status, ce.Hint)
		d.answer(id, map[string]any{"error": ce.Code, "status": ce.Status, "hint": ce.Hint + " Call one of the offered tools again, fixing the arguments."})
		return nil, nil
	}
	st.OK = true
	if res.Frame != nil {
		d.frame = res.Frame
		st.State, st.Status = d.frame.State, d.frame.Status
		d.emit(st)
		d.printf("%2d. %s %s → %s [%s]\n", d.steps, name, oneLine(arguments, 200), d.frame.State, d.frame.Status)
		if err := d.waitProcessing(ctx); err != nil {
			return nil, err
		}
		d.answer(id, d.frameView())
		return nil, nil
	}
	st.State, st.Status, st.Result = d.frame.State, d.frame.Status, res.Result
	d.emit(st)
	b, _ := json.Marshal(res.Result)
	d.printf("%2d. %s %s = %s\n", d.steps, name, oneLine(arguments, 200), oneLine(string(b), 200))
	d.answer(id, map[string]any{"result": res.Result})
	return nil, nil
}

// confirm asks the person at the terminal whether to fire a critical
// action; without a terminal it answers no.
func (d *driver) confirm(t client.ToolDef, arguments string) bool {
	getenv := agentGetenv(d.env)
	if d.o.json || !tui.Interactive(d.env.Stdin, d.env.Stderr, getenv) {
		return false
	}
	fmt.Fprintf(d.errw, "The model wants to fire the critical action %q with %s. Fire it? [y/N] ", t.Target, oneLine(arguments, 200))
	line, _ := bufio.NewReader(d.env.Stdin).ReadString('\n')
	ans := strings.ToLower(strings.TrimSpace(line))
	return ans == "y" || ans == "yes"
}

// frameView is what the model is told after a transition.
func (d *driver) frameView() map[string]any {
	v := map[string]any{"state": d.frame.State, "status": d.frame.Status, "hint": d.frame.Hint}
	if len(d.frame.Data) > 0 {
		v["data"] = d.frame.Data
	}
	defs, _ := client.Tools(d.frame.Frame)
	names := make([]string, len(defs))
	for i, t := range defs {
		names[i] = t.Name
	}
	v["tools_now"] = names
	return v
}

// waitProcessing follows the stream while the run is processing, showing
// its progress, until it waits for input again or ends.
func (d *driver) waitProcessing(ctx context.Context) error {
	if d.frame.Status != protocol.StatusProcessing {
		return nil
	}
	d.printf("    %s is processing; following the stream.\n", d.frame.State)
	for it, err := range d.c.Stream(ctx, d.frame.RunID, &client.StreamOptions{LastEventID: d.frame.Version()}) {
		if err != nil {
			return err
		}
		switch {
		case it.Progress != nil:
			if d.o.json {
				d.emit(map[string]any{"type": "progress", "run_id": d.frame.RunID, "progress": it.Progress.Progress, "hint": it.Progress.Hint})
			} else {
				fmt.Fprintln(d.errw, progressBar(it.Progress.Progress, it.Progress.Hint))
			}
		case it.Frame != nil:
			d.frame = d.frame.Streamed(it.Frame)
			if d.frame.Status != protocol.StatusProcessing {
				d.printf("    → %s [%s]\n", d.frame.State, d.frame.Status)
				return nil
			}
		}
	}
	return nil
}

// progressBar draws a one-line text bar: [#######-------------]  35% hint.
func progressBar(progress, hint string) string {
	var pct float64
	_, err := fmt.Sscanf(strings.TrimSuffix(strings.TrimSpace(progress), "%"), "%g", &pct)
	if err != nil {
		return fmt.Sprintf("    %s %s", progress, hint)
	}
	pct = max(0, min(100, pct))
	n := int(pct / 5)
	return strings.TrimRight(fmt.Sprintf("    [%s%s] %3.0f%% %s", strings.Repeat("#", n), strings.Repeat("-", 20-n), pct, hint), " ")
}

// systemPrompt is the system message for the current frame: how to drive,
// the state, its skill and the resources the skill or hint names.
func (d *driver) systemPrompt(ctx context.Context) (string, error) {
	f := d.frame
	var b strings.Builder
	fmt.Fprintf(&b, "You drive a run of the workflow %q on an ASMP server for a person, one tool call at a time.\n", f.WorkflowID)
	b.WriteString("Each tool is an action offered in the run's current state; tools named tool_<name> are stage tools that answer a question and leave the state as it is. ")
	b.WriteString("Call only the tools offered now, with exactly the fields their parameters name, each of the type given (a number as a JSON number, not a string). ")
	b.WriteString("When a call is refused, its result carries the server's hint: read it and call again. The tools change after every action.\n\n")
	fmt.Fprintf(&b, "Current state: %s [%s]\nHint: %s\n", f.State, f.Status, f.Hint)
	if len(f.Data) > 0 {
		data, _ := json.Marshal(f.Data)
		fmt.Fprintf(&b, "Run data: %s\n", data)
	}
	if len(f.Milestones) > 0 {
		fmt.Fprintf(&b, "Milestones: %s\n", strings.Join(f.Milestones, ", "))
	}
	skill := ""
	if s := f.ActiveSkill; s != nil && s.URL != "" {
		text, err := d.skill(ctx, s.URL)
		if err != nil {
			fmt.Fprintf(&b, "\nSkill %q could not be read (%s).\n", s.Name, client.HintOf(err))
		} else {
			skill = text
			fmt.Fprintf(&b, "\nActive skill %q", s.Name)
			if s.Version != "" {
				fmt.Fprintf(&b, " (version %s)", s.Version)
			}
			if s.ContextSummary != "" {
				fmt.Fprintf(&b, " — %s", s.ContextSummary)
			}
			fmt.Fprintf(&b, ":\n\n%s\n", text)
		}
	}
	for _, r := range f.Resources {
		path := resourcePath(r.URI)
		if path == "" || !(mentions(skill, path) || mentions(f.Hint, path) || (r.Name != "" && (mentions(skill, r.Name) || mentions(f.Hint, r.Name)))) {
			continue
		}
		c, err := d.c.Resource(ctx, f.RunID, path)
		if err != nil {
			fmt.Fprintf(&b, "\nResource %q could not be read (%s).\n", path, client.HintOf(err))
			continue
		}
		fmt.Fprintf(&b, "\nResource %q (%s, %s):\n\n%s\n", path, r.Name, c.MimeType, clip(string(c.Body), maxPromptDoc))
	}
	return b.String(), nil
}

// skill reads a skill once per drive.
func (d *driver) skill(ctx context.Context, url string) (string, error) {
	if s, ok := d.skills[url]; ok {
		return s, nil
	}
	c, err := d.c.Skill(ctx, url)
	if err != nil {
		return "", err
	}
	s := clip(string(c.Body), maxPromptDoc)
	d.skills[url] = s
	return s, nil
}

// resourcePath is the path of a stage resource's URI (…/resources/PATH).
func resourcePath(uri string) string {
	_, p, ok := strings.Cut(uri, "/resources/")
	if !ok {
		return ""
	}
	return p
}

// mentions reports whether text names word as a whole word.
func mentions(text, word string) bool {
	if word == "" {
		return false
	}
	lt, lw := strings.ToLower(text), strings.ToLower(word)
	for i := 0; ; {
		j := strings.Index(lt[i:], lw)
		if j < 0 {
			return false
		}
		j += i
		end := j + len(lw)
		if (j == 0 || !isWordByte(lt[j-1])) && (end == len(lt) || !isWordByte(lt[end])) {
			return true
		}
		i = j + 1
	}
}

func isWordByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "\n[… cut]"
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	if strings.TrimSpace(s) == "" {
		return "'{}'"
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// finish prints the summary and returns the drive's error (nil when the
// run completed).
func (d *driver) finish(outcome string, confirm *driveConfirm) error {
	f := d.frame
	s := driveSummary{Type: "summary", RunID: f.RunID, WorkflowID: f.WorkflowID, State: f.State, Status: f.Status,
		Outcome: outcome, Steps: d.steps, Tokens: d.tokens, Confirm: confirm}
	var err error
	switch outcome {
	case outcomeCompleted:
		s.Hint = fmt.Sprintf("Run %s completed in state %s after %d steps.", f.RunID, f.State, d.steps)
	case outcomeFailed:
		s.Hint = fmt.Sprintf("Run %s failed in state %s: %s", f.RunID, f.State, f.Hint)
	case outcomeBudget:
		s.Hint = fmt.Sprintf("The step budget of %d ran out with run %s at %s [%s]; continue with asmp drive --run %s, or by hand with asmp show %s.", d.o.maxSteps, f.RunID, f.State, f.Status, f.RunID, f.RunID)
	case outcomeConfirm:
		s.Hint = fmt.Sprintf("The model chose the critical action %q (is_critical): a person must confirm it. Fire it with `%s`, or run asmp drive --run %s --yes to let the model fire it.", confirm.Action, confirm.Command, f.RunID)
	case outcomeNothing:
		s.Hint = fmt.Sprintf("Run %s is %s in state %s but offers no action now (every action's guard refuses it, given the run's data); the model was not asked. Another client must change the run first: follow it with asmp watch %s, then continue with asmp drive --run %s.", f.RunID, f.Status, f.State, f.RunID, f.RunID)
	case outcomeStopped:
		s.Hint = fmt.Sprintf("The model stopped calling tools with run %s at %s [%s]; continue with asmp drive --run %s, or by hand with asmp show %s.", f.RunID, f.State, f.Status, f.RunID, f.RunID)
	}
	if outcome != outcomeCompleted {
		err = &exitError{code: 1, err: errors.New(s.Hint)}
	}
	d.emit(s)
	if err == nil {
		d.printf("%s\n", s.Hint)
	} // otherwise Main prints the hint as the error
	d.printf("Tokens used: %d (prompt %d, completion %d).\n", d.tokens.Total, d.tokens.Prompt, d.tokens.Completion)
	return err
}
