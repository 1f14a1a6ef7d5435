package tui

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/charmbracelet/bubbles/cursor"
	"github.com/charmbracelet/bubbles/progress"
	"github.com/charmbracelet/bubbles/spinner"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/protocol"
)

type mode int

const (
	modeLoading mode = iota // waiting for the run
	modeSelect              // choosing an option
	modeInput               // filling the chosen option's fields
	modeBusy                // a transition is in flight
	modeDone                // the run completed or failed
	modeConfirm             // asking before firing a critical action
)

// pendingFire is a critical action waiting for the user's y.
type pendingFire struct {
	option    int // index in the CLI options
	input     map[string]any
	fromInput bool // the form stays filled if the user says no
}

// field is one input of the chosen option.
type field struct {
	name, typ string
	input     textinput.Model
	err       string
}

// Model is the bubbletea model of the full-screen UI. Build it with
// NewModel; it is driven by key messages and the run's stream.
type Model struct {
	ctx  context.Context
	opts Options
	b    client.Backend

	runID   string
	frame   *client.RunFrame
	version int64
	cli     protocol.CLI
	cliVer  int64 // version the CLI object was loaded for

	mode   mode
	cursor int
	chosen int // option index being filled in modeInput
	fields []field
	focus  int
	ask    *pendingFire // in modeConfirm

	spin     spinner.Model
	bar      progress.Model
	progress float64 // 0..1 of the running task, -1 = none yet
	progHint string

	errHint string  // the last error's hint, shown until dismissed
	retry   tea.Cmd // what to retry after an error ("" = reload)
	notice  string  // a one-line note (what was fired, a state change)
	fatal   error   // an error that ends the session (e.g. run not found)

	// Input safety: keys typed for one screen must not act on the next.
	// held: the run moved elsewhere (another client); keys are discarded
	// until a space. settling: a new screen (state, options or a critical
	// question) was just shown; keys already queued before settleMsg
	// comes back were typed before it and are discarded.
	held     bool
	settling int // generation awaited; 0 when settled
	settleN  int

	width    int
	stream   chan tea.Msg
	cancel   context.CancelFunc
	quitting bool
}

// Messages.
type (
	loadedMsg struct {
		frame *client.RunFrame
		cli   protocol.CLI
		note  string
	}
	cliMsg struct {
		version int64
		cli     protocol.CLI
	}
	errMsg struct {
		err   error
		retry tea.Cmd
		fatal bool
	}
	settleMsg    struct{ gen int }
	streamMsg    struct{ item client.StreamItem }
	streamErrMsg struct{ err error }
	streamEndMsg struct{}
)

// NewModel returns the UI model for o. It starts (or attaches to) the run
// when the program starts.
func NewModel(ctx context.Context, o Options) *Model {
	if ctx == nil {
		ctx = context.Background()
	}
	sctx, cancel := context.WithCancel(ctx)
	m := &Model{ctx: sctx, cancel: cancel, opts: o, b: o.Backend, runID: o.RunID, progress: -1, width: 80}
	if o.ASCII {
		m.spin = spinner.New(spinner.WithSpinner(spinner.Line))
		m.bar = progress.New(progress.WithFillCharacters('#', '-'), progress.WithoutPercentage(), progress.WithWidth(30))
	} else {
		m.spin = spinner.New(spinner.WithSpinner(spinner.Dot), spinner.WithStyle(styles.spinner))
		m.bar = progress.New(progress.WithDefaultGradient(), progress.WithoutPercentage(), progress.WithWidth(30))
	}
	return m
}

// Result says how the session ended.
func (m *Model) Result() Result {
	r := Result{RunID: m.runID}
	if m.frame != nil {
		r.State, r.Status, r.Hint = m.frame.State, m.frame.Status, m.frame.Hint
	}
	return r
}

func (m *Model) stop() { m.cancel() }

// Init starts or loads the run.
func (m *Model) Init() tea.Cmd {
	return tea.Batch(m.load(), m.spin.Tick)
}

// load starts the run (no run id yet) or reads it.
func (m *Model) load() tea.Cmd {
	b, ctx, runID, o := m.b, m.ctx, m.runID, m.opts
	return func() tea.Msg {
		var f *client.RunFrame
		var err error
		if runID == "" {
			f, err = b.StartRun(ctx, o.WorkflowID, o.Data)
		} else {
			f, err = b.Frame(ctx, runID)
		}
		if err != nil {
			return errMsg{err: err, fatal: true}
		}
		cli, err := b.CLI(ctx, f.RunID)
		if err != nil {
			return errMsg{err: err, fatal: true}
		}
		return loadedMsg{frame: f, cli: cli}
	}
}

// reload reads the run again after an error.
func (m *Model) reload() tea.Cmd {
	b, ctx, runID := m.b, m.ctx, m.runID
	return func() tea.Msg {
		f, err := b.Frame(ctx, runID)
		if err != nil {
			return errMsg{err: err}
		}
		cli, err := b.CLI(ctx, runID)
		if err != nil {
			return errMsg{err: err}
		}
		return loadedMsg{frame: f, cli: cli}
	}
}

func (m *Model) loadCLI(version int64) tea.Cmd {
	b, ctx, runID := m.b, m.ctx, m.runID
	return func() tea.Msg {
		cli, err := b.CLI(ctx, runID)
		if err != nil {
			return errMsg{err: err}
		}
		return cliMsg{version: version, cli: cli}
	}
}

// fire sends a transition that is valid only for the frame on screen.
func (m *Model) fire(action string, input map[string]any) tea.Cmd {
	b, ctx, runID := m.b, m.ctx, m.runID
	etag := ""
	label := action
	if m.frame != nil {
		etag = m.frame.ETag
	}
	for _, o := range m.cli.Options {
		if o.Action == action {
			label = o.Label
		}
	}
	var cmd tea.Cmd
	cmd = func() tea.Msg {
		f, err := b.Transition(ctx, runID, action, input, &client.TransitionOptions{IfMatch: etag})
		if err != nil {
			return errMsg{err: err, retry: cmd}
		}
		cli, err := b.CLI(ctx, runID)
		if err != nil {
			return errMsg{err: err}
		}
		return loadedMsg{frame: f, cli: cli, note: "Chose " + label + "."}
	}
	return cmd
}

// follow starts the stream of the run in the background.
func (m *Model) follow() tea.Cmd {
	if m.stream != nil {
		return nil
	}
	ch := make(chan tea.Msg, 64)
	m.stream = ch
	b, ctx, runID, last := m.b, m.ctx, m.runID, m.version
	go func() {
		defer close(ch)
		for it, err := range b.Stream(ctx, runID, &client.StreamOptions{LastEventID: last}) {
			var msg tea.Msg = streamMsg{item: it}
			if err != nil {
				msg = streamErrMsg{err: err}
			}
			select {
			case ch <- msg:
			case <-ctx.Done():
				return
			}
		}
	}()
	return waitStream(ch)
}

func waitStream(ch chan tea.Msg) tea.Cmd {
	return func() tea.Msg {
		msg, ok := <-ch
		if !ok {
			return streamEndMsg{}
		}
		return msg
	}
}

// Update handles a message.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width = max(msg.Width, 20)
		m.bar.Width = min(40, max(10, m.width-30))
		return m, nil
	case spinner.TickMsg:
		var cmd tea.Cmd
		m.spin, cmd = m.spin.Update(msg)
		return m, cmd
	case settleMsg:
		if msg.gen == m.settling {
			m.settling = 0
		}
		return m, nil
	case loadedMsg:
		return m, m.applyFrame(msg.frame, &msg.cli, msg.note)
	case cliMsg:
		msg.cli = withKeys(msg.cli)
		if msg.version >= m.cliVer {
			changed := !sameOptions(m.cli.Options, msg.cli.Options)
			m.setCLI(msg.cli, msg.version)
			if changed && (m.mode == modeSelect || m.mode == modeInput) {
				m.enterSelect()
			}
			if changed && m.mode != modeDone {
				// (The done screen shows no options: nothing to settle.)
				return m, m.settle()
			}
		}
		return m, nil
	case errMsg:
		return m.onError(msg)
	case streamMsg:
		return m, tea.Batch(m.onStream(msg.item), waitStream(m.stream))
	case streamErrMsg:
		if m.mode != modeDone && !errors.Is(msg.err, context.Canceled) {
			m.notice = "Live updates stopped: " + client.HintOf(msg.err)
		}
		return m, waitStream(m.stream)
	case streamEndMsg:
		return m, nil
	case tea.KeyMsg:
		return m.onKey(msg)
	}
	if m.mode == modeInput && m.focus < len(m.fields) {
		var cmd tea.Cmd
		m.fields[m.focus].input, cmd = m.fields[m.focus].input.Update(msg)
		return m, cmd
	}
	return m, nil
}

// applyFrame shows a newer frame (and its CLI object when given).
func (m *Model) applyFrame(f *client.RunFrame, cli *protocol.CLI, note string) tea.Cmd {
	first := m.frame == nil
	if !first && f.Version() != 0 && f.Version() < m.version {
		return nil // older than what is shown
	}
	prevState := ""
	if m.frame != nil {
		prevState = m.frame.State
	}
	m.frame = f
	m.runID = f.RunID
	if v := f.Version(); v > m.version {
		m.version = v
	}
	if note != "" {
		m.notice = note
	}
	if first && m.opts.OnRun != nil {
		m.opts.OnRun(f)
	}
	if f.Status != protocol.StatusProcessing {
		m.progress, m.progHint = -1, ""
	}
	var cmds []tea.Cmd
	optsChanged := false
	if cli != nil {
		keyed := withKeys(*cli)
		optsChanged = !sameOptions(m.cli.Options, keyed.Options)
		m.setCLI(keyed, m.version)
	}
	stateChanged := first || f.State != prevState
	ours := m.mode == modeBusy // our own transition is on its way back
	switch {
	case protocol.Terminal(f.Status):
		m.mode = modeDone
		m.fields = nil
	case m.mode == modeBusy || m.mode == modeLoading || stateChanged || optsChanged:
		m.enterSelect()
	}
	if stateChanged && !first && note == "" && !ours {
		m.notice = "The run moved to " + f.State + "."
		if !protocol.Terminal(f.Status) && !ours {
			// Someone else moved it: what was being typed was meant for
			// the state it left.
			m.held = true
			m.notice = "Moved to " + f.State + " by another client; what you typed was discarded. Press space to go on."
		}
	}
	if stateChanged || (optsChanged && m.mode != modeDone) {
		cmds = append(cmds, m.settle())
	}
	if !protocol.Terminal(f.Status) {
		cmds = append(cmds, m.follow())
	}
	return tea.Batch(cmds...)
}

// settle starts a new settling generation: keys processed before its
// settleMsg comes back were queued before the new screen and are dropped.
func (m *Model) settle() tea.Cmd {
	m.settleN++
	gen := m.settleN
	m.settling = gen
	return func() tea.Msg { return settleMsg{gen: gen} }
}

func (m *Model) setCLI(cli protocol.CLI, version int64) {
	m.cli, m.cliVer = cli, version
	if m.cursor >= len(cli.Options) {
		m.cursor = max(0, len(cli.Options)-1)
	}
}

// withKeys gives each option without keys (a state without a CLI hook, or
// options its hook does not name) a one-letter key, shown and accepted
// like the workflow's own: the first letter of its action that no other
// option uses and the UI does not use itself (q quits; j, k, g move; y, n
// answer questions; r retries).
func withKeys(cli protocol.CLI) protocol.CLI {
	opts := slices.Clone(cli.Options)
	cli.Options = opts
	const reserved = "qjkgynr"
	taken := map[string]bool{}
	for _, o := range opts {
		taken[normKey(o.Keys)] = true
	}
	for i := range opts {
		if opts[i].Keys != "" {
			continue
		}
		for _, r := range strings.ToLower(opts[i].Action) {
			if k := string(r); r >= 'a' && r <= 'z' && !strings.ContainsRune(reserved, r) && !taken[k] {
				opts[i].Keys, taken[k] = k, true
				break
			}
		}
	}
	return cli
}

// enterSelect shows the option list, with the cursor on the enter-key
// option; a state whose one option takes input goes straight to its form.
func (m *Model) enterSelect() {
	m.mode = modeSelect
	m.fields = nil
	m.ask = nil // a question about options that changed is void
	m.cursor = 0
	for i, o := range m.cli.Options {
		if normKey(o.Keys) == "enter" {
			m.cursor = i
		}
	}
	if len(m.cli.Options) == 1 && len(m.expects(0)) > 0 {
		m.startInput(0)
	}
}

func (m *Model) onStream(it client.StreamItem) tea.Cmd {
	switch {
	case it.Frame != nil:
		// The stream yields each change once (client.Stream), but its ids
		// are not the run's versions on every server (the reference
		// servers number each connection's lines from "0"): a frame is
		// skipped only when it shows the run as the frame on screen does
		// (the echo of our own transition).
		if m.frame != nil && sameFrame(&m.frame.Frame, &it.Frame.Frame) {
			return nil
		}
		// An id above the shown version is the run's new version (asmp's
		// ids are); any other id says nothing of the version, so the
		// frame carries no entity tag (no If-Match from it).
		etag, version := "", m.version
		if it.Frame.ID > m.version {
			etag, version = strconv.Quote(strconv.FormatInt(it.Frame.ID, 10)), it.Frame.ID
		}
		f := &client.RunFrame{Frame: it.Frame.Frame, ETag: etag}
		cmd := m.applyFrame(f, nil, "")
		return tea.Batch(cmd, m.loadCLI(version))
	case it.Progress != nil:
		p := strings.TrimSuffix(strings.TrimSpace(it.Progress.Progress), "%")
		if v, err := strconv.ParseFloat(p, 64); err == nil {
			m.progress = min(max(v/100, 0), 1)
		}
		m.progHint = it.Progress.Hint
	}
	return nil
}

func (m *Model) onError(e errMsg) (tea.Model, tea.Cmd) {
	if e.fatal && m.frame == nil {
		m.fatal = e.err
		m.quitting = true
		return m, tea.Quit
	}
	m.errHint = client.HintOf(e.err)
	m.retry = e.retry
	if client.IsConflict(e.err) || client.IsForbidden(e.err) {
		m.retry = nil // the run moved on: retrying the same request cannot work
	}
	if m.mode == modeBusy {
		if m.fields != nil {
			m.mode = modeInput
		} else {
			m.mode = modeSelect
		}
	}
	return m, nil
}

// expects returns what option i's action expects (canonical types).
func (m *Model) expects(i int) map[string]string {
	if m.frame == nil || i < 0 || i >= len(m.cli.Options) {
		return nil
	}
	ns, _ := m.frame.Action(m.cli.Options[i].Action)
	out := map[string]string{}
	for k, t := range ns.Expects {
		if c, ok := protocol.NormalizeType(t); ok {
			t = c
		}
		out[k] = t
	}
	return out
}

// choose acts on option i: fire it, or open its input form.
func (m *Model) choose(i int) tea.Cmd {
	if i < 0 || i >= len(m.cli.Options) {
		return nil
	}
	if len(m.expects(i)) > 0 {
		return m.startInput(i)
	}
	return m.fireOption(i, map[string]any{}, false)
}

// critical reports whether option i's action is marked is_critical.
func (m *Model) critical(i int) bool {
	if m.frame == nil || i < 0 || i >= len(m.cli.Options) {
		return false
	}
	ns, ok := m.frame.Action(m.cli.Options[i].Action)
	return ok && ns.IsCritical
}

// fireOption fires option i with input, or first asks for a y when the
// action is critical.
func (m *Model) fireOption(i int, input map[string]any, fromInput bool) tea.Cmd {
	m.errHint = ""
	if m.critical(i) && !m.opts.Yes {
		m.mode = modeConfirm
		m.ask = &pendingFire{option: i, input: input, fromInput: fromInput}
		return m.settle() // a y typed ahead does not answer the question
	}
	m.mode = modeBusy
	return m.fire(m.cli.Options[i].Action, input)
}

func (m *Model) startInput(i int) tea.Cmd {
	m.mode = modeInput
	m.chosen, m.cursor = i, i
	m.errHint = ""
	ex := m.expects(i)
	names := make([]string, 0, len(ex))
	for k := range ex {
		names = append(names, k)
	}
	sort.Strings(names)
	m.fields = make([]field, len(names))
	for j, n := range names {
		ti := textinput.New()
		ti.Prompt = ""
		ti.Placeholder = placeholder(ex[n])
		ti.CharLimit = 4096
		ti.Width = min(50, max(10, m.width-30))
		ti.Cursor.SetMode(cursor.CursorStatic)
		m.fields[j] = field{name: n, typ: ex[n], input: ti}
	}
	m.focus = 0
	return m.fields[0].input.Focus()
}

func placeholder(typ string) string {
	switch typ {
	case protocol.TypeInteger:
		return "a whole number, e.g. 42"
	case protocol.TypeNumber:
		return "a number, e.g. 12.5"
	case protocol.TypeBoolean:
		return "yes or no"
	case protocol.TypeArray:
		return "a, b, c  or  [1, 2]"
	case protocol.TypeObject:
		return `{"key": "value"}`
	}
	return "text"
}

func (m *Model) setFocus(i int) tea.Cmd {
	if len(m.fields) == 0 {
		return nil
	}
	i = (i + len(m.fields)) % len(m.fields)
	m.fields[m.focus].input.Blur()
	m.focus = i
	return m.fields[i].input.Focus()
}

// submit validates the form client-side and fires the chosen option.
func (m *Model) submit() tea.Cmd {
	input := map[string]any{}
	bad := -1
	for i := range m.fields {
		f := &m.fields[i]
		v, err := client.ParseValue(f.typ, f.input.Value())
		if err == nil && f.typ == protocol.TypeString && f.input.Value() == "" {
			err = errors.New("is empty")
		}
		if err != nil {
			f.err = err.Error()
			if bad < 0 {
				bad = i
			}
			continue
		}
		f.err = ""
		input[f.name] = v
	}
	if bad >= 0 {
		return m.setFocus(bad)
	}
	return m.fireOption(m.chosen, input, true)
}

func sameOptions(a, b []protocol.CLIOption) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// stale reports whether the CLI object on screen is older than the frame.
func (m *Model) stale() bool { return m.cliVer < m.version }

func normKey(k string) string { return strings.ToLower(strings.Join(strings.Fields(k), " ")) }

// keyOption returns the option whose keys are exactly key, or -1.
func (m *Model) keyOption(key string) int {
	for i, o := range m.cli.Options {
		if k := normKey(o.Keys); k != "" && k == normKey(key) {
			return i
		}
	}
	return -1
}

func (m *Model) onKey(k tea.KeyMsg) (tea.Model, tea.Cmd) {
	key := k.String()
	if key == "ctrl+c" {
		m.quitting = true
		return m, tea.Quit
	}
	if m.settling != 0 {
		return m, nil // typed before the screen it would act on was shown
	}
	if m.held {
		if key == " " {
			m.held = false
			m.notice = "The run is at " + m.frame.State + "."
		}
		return m, nil
	}
	if m.errHint != "" && m.mode != modeInput {
		switch key {
		case "r":
			if m.retry != nil {
				m.errHint = ""
				m.mode = modeBusy
				return m, m.retry
			}
			m.errHint = ""
			return m, m.reload()
		case "esc", "enter", " ":
			m.errHint = ""
			return m, m.reload()
		case "q":
			m.quitting = true
			return m, tea.Quit
		}
		return m, nil
	}
	switch m.mode {
	case modeConfirm:
		ask := m.ask
		switch key {
		case "y", "Y":
			if m.stale() {
				return m, nil // the run moved: wait for its options before sending anything
			}
			m.ask = nil
			m.mode = modeBusy
			return m, m.fire(m.cli.Options[ask.option].Action, ask.input)
		case "n", "N", "esc", "q":
			m.ask = nil
			m.notice = "Not sent: " + m.cli.Options[ask.option].Label + "."
			if ask.fromInput {
				m.mode = modeInput
				return m, m.setFocus(m.focus)
			}
			m.mode = modeSelect
		}
		return m, nil
	case modeDone:
		switch key {
		case "q", "enter", "esc", " ":
			m.quitting = true
			return m, tea.Quit
		}
	case modeLoading, modeBusy:
		if key == "q" || key == "esc" {
			m.quitting = true
			return m, tea.Quit
		}
	case modeSelect:
		if m.stale() {
			if key == "q" || key == "esc" {
				m.quitting = true
				return m, tea.Quit
			}
			return m, nil // the options of the new state are on their way
		}
		if i := m.keyOption(key); i >= 0 && key != "enter" {
			m.cursor = i
			return m, m.choose(i)
		}
		switch key {
		case "up", "k", "shift+tab":
			if len(m.cli.Options) > 0 {
				m.cursor = (m.cursor - 1 + len(m.cli.Options)) % len(m.cli.Options)
			}
		case "down", "j", "tab":
			if len(m.cli.Options) > 0 {
				m.cursor = (m.cursor + 1) % len(m.cli.Options)
			}
		case "home", "g":
			m.cursor = 0
		case "end", "G":
			m.cursor = max(0, len(m.cli.Options)-1)
		case "enter", " ":
			return m, m.choose(m.cursor)
		case "q", "esc":
			m.quitting = true
			return m, tea.Quit
		default:
			if n, err := strconv.Atoi(key); err == nil && n >= 1 && n <= len(m.cli.Options) {
				m.cursor = n - 1
				return m, m.choose(n - 1)
			}
		}
	case modeInput:
		switch key {
		case "esc":
			m.errHint = ""
			m.mode = modeSelect
			m.fields = nil
			return m, nil
		case "tab", "down":
			return m, m.setFocus(m.focus + 1)
		case "shift+tab", "up":
			return m, m.setFocus(m.focus - 1)
		case "enter":
			if m.focus < len(m.fields)-1 {
				return m, m.setFocus(m.focus + 1)
			}
			return m, m.submit()
		}
		var cmd tea.Cmd
		m.fields[m.focus].input, cmd = m.fields[m.focus].input.Update(k)
		m.fields[m.focus].err = ""
		return m, cmd
	}
	return m, nil
}

// sameFrame reports whether two frames show the run alike.
func sameFrame(a, b *protocol.Frame) bool {
	ea, err1 := json.Marshal(a)
	eb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ea, eb)
}
