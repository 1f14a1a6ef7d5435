package client

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/asmp-dev/asmp/protocol"
)

// Resolve turns what a user typed at a run's CLI into the action to fire
// and its input, by the rule every asmp client follows (SPEC section 3,
// clrun's rule, made precise here). cli is the run's CLI object, frame its
// State Frame (for what each action expects); text is one line as typed.
//
// Selecting an option. The whole text (trimmed) selects an option when it is
//
//  1. a number n in 1..len(cli.Options): option n;
//  2. an action name of an option: exactly, else case-insensitively when
//     that names one option;
//  3. an option's keys: the text equals the keys string ignoring case and
//     runs of spaces, so "y" picks {keys:"y"} and "down enter" picks
//     {keys:"down enter"} (a key sequence is matched as typed, as a whole;
//     it is not replayed as key presses);
//  4. an option's label, ignoring case.
//
// An empty line is the key "enter": it picks the option whose keys are
// "enter", else the only option. An option that expects input cannot be
// picked without input: "save" alone is an error saying what to type.
//
// Giving input. When the first word selects an option by rules 1–3 and more
// text follows, the rest is that option's input: "save hello world" fires
// save with value "hello world". Otherwise the whole text is free text, and
// goes to the one offered option that expects input (an error when none or
// several do, when that option is critical — is_critical actions must be
// named — or when the text looks like a misspelt name of another option).
// Input text is read so:
//
//   - one expected field: the text is its value ({"value": text} for the
//     config wizard's save), converted to the field's type by ParseValue;
//     "field=text" also works, and a text that is one quoted word loses its
//     quotes, so `save "1"` enters the value 1;
//   - several fields: space-separated key=value pairs with shell-like
//     quoting, e.g. `amount=12.5 description="Team lunch"`; every expected
//     field must be given, and no other;
//   - any number of fields: a JSON object, e.g. {"amount": 12.5, …}.
//
// To enter a value that would itself select an option (a value of "1" or
// "save"), put the action first: "save 1". The returned input is never nil.
// Errors are *protocol.Error (code invalid) whose hint tells what the user
// can type. Resolve does not contact the server and never panics.
func Resolve(cli protocol.CLI, frame protocol.Frame, text string) (action string, input map[string]any, err error) {
	r := newResolver(cli, frame)
	t := strings.TrimSpace(text)
	if err := r.ready(); err != nil {
		return "", nil, err
	}
	if t == "" {
		return r.empty()
	}
	if c := r.whole(t); c != nil {
		return r.pick(c)
	}
	first, rest := cutWord(t)
	if rest != "" {
		if c := r.word(first); c != nil {
			toks, err := splitWords(rest)
			if err != nil {
				return "", nil, err
			}
			return r.withInput(c, rest, toks, true)
		}
	}
	toks, err := splitWords(t)
	if err != nil {
		return "", nil, err
	}
	return r.freeText(t, toks, true)
}

// ResolveArgs is Resolve for words that a shell has already split, as in
// `asmp step RUN save hello world`: quotes are not read again, and the
// words after a selecting first word are its input (joined by one space for
// a single field, key=value pairs for several).
func ResolveArgs(cli protocol.CLI, frame protocol.Frame, args []string) (action string, input map[string]any, err error) {
	switch len(args) {
	case 0:
		return Resolve(cli, frame, "")
	case 1:
		r := newResolver(cli, frame)
		if err := r.ready(); err != nil {
			return "", nil, err
		}
		t := strings.TrimSpace(args[0])
		if t == "" {
			return r.empty()
		}
		if c := r.whole(t); c != nil {
			return r.pick(c)
		}
		return r.freeText(args[0], args, false)
	}
	r := newResolver(cli, frame)
	if err := r.ready(); err != nil {
		return "", nil, err
	}
	if c := r.word(strings.TrimSpace(args[0])); c != nil {
		return r.withInput(c, strings.Join(args[1:], " "), args[1:], false)
	}
	return r.freeText(strings.Join(args, " "), args, false)
}

// choice is one CLI option with what its transition expects.
type choice struct {
	n        int // 1-based
	opt      protocol.CLIOption
	expects  map[string]string // canonical types
	critical bool
}

type resolver struct {
	cli     protocol.CLI
	frame   protocol.Frame
	choices []*choice
}

func newResolver(cli protocol.CLI, frame protocol.Frame) *resolver {
	r := &resolver{cli: cli, frame: frame}
	for i, o := range cli.Options {
		c := &choice{n: i + 1, opt: o, expects: map[string]string{}}
		if ns, ok := frame.Action(o.Action); ok {
			for k, t := range ns.Expects {
				if canon, ok := protocol.NormalizeType(t); ok {
					t = canon
				}
				c.expects[k] = t
			}
			c.critical = ns.IsCritical
		}
		r.choices = append(r.choices, c)
	}
	return r
}

func invalid(format string, args ...any) *protocol.Error {
	return protocol.Errorf(protocol.EInvalid, format, args...)
}

func (r *resolver) ready() error {
	if len(r.choices) > 0 {
		return nil
	}
	switch {
	case r.frame.Status == protocol.StatusProcessing:
		return invalid("Nothing can be chosen now: a background task is running in state %s. Wait for it (watch the run's stream).", r.frame.State)
	case protocol.Terminal(r.frame.Status):
		return invalid("The run is %s (state %s); it offers no more actions.", r.frame.Status, r.frame.State)
	}
	return invalid("No actions are offered now (state %s).", orUnknown(r.frame.State))
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// empty resolves an empty line: the enter-key option, or the only option.
func (r *resolver) empty() (string, map[string]any, error) {
	for _, c := range r.choices {
		if normKeys(c.opt.Keys) == "enter" {
			return r.pick(c)
		}
	}
	if len(r.choices) == 1 {
		return r.pick(r.choices[0])
	}
	return "", nil, invalid("Nothing was typed. %s", Help(r.cli, r.frame))
}

// whole matches the whole text by number, action, keys or label.
func (r *resolver) whole(t string) *choice {
	if c := r.word(t); c != nil {
		return c
	}
	nt := normKeys(t)
	var found *choice
	for _, c := range r.choices {
		if c.opt.Label != "" && normKeys(c.opt.Label) == nt {
			if found != nil {
				return nil // two options share the label: ambiguous
			}
			found = c
		}
	}
	return found
}

// word matches one word (or a whole key sequence) by number, action or keys.
func (r *resolver) word(w string) *choice {
	if n, err := strconv.Atoi(w); err == nil && isDigits(w) {
		if n >= 1 && n <= len(r.choices) {
			return r.choices[n-1]
		}
		return nil
	}
	for _, c := range r.choices {
		if c.opt.Action == w {
			return c
		}
	}
	var found *choice
	for _, c := range r.choices {
		if strings.EqualFold(c.opt.Action, w) {
			if found != nil {
				found = nil
				break
			}
			found = c
		}
	}
	if found != nil {
		return found
	}
	nw := normKeys(w)
	for _, c := range r.choices {
		if k := normKeys(c.opt.Keys); k != "" && k == nw {
			return c
		}
	}
	return nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func normKeys(k string) string { return strings.ToLower(strings.Join(strings.Fields(k), " ")) }

// pick selects c with no input.
func (r *resolver) pick(c *choice) (string, map[string]any, error) {
	if len(c.expects) > 0 {
		return "", nil, invalid("%s needs input: %s. %s", describeChoice(c), protocol.DescribeExpects(c.expects), inputUsage(c))
	}
	return c.opt.Action, map[string]any{}, nil
}

// freeText gives text to the one option that expects input.
func (r *resolver) freeText(raw string, toks []string, fromText bool) (string, map[string]any, error) {
	var with []*choice
	for _, c := range r.choices {
		if len(c.expects) > 0 {
			with = append(with, c)
		}
	}
	t := strings.TrimSpace(raw)
	switch len(with) {
	case 0:
		return "", nil, invalid("%q is not an option here. %s", clip(t), Help(r.cli, r.frame))
	case 1:
	default:
		names := make([]string, len(with))
		for i, c := range with {
			names[i] = c.opt.Action
		}
		return "", nil, invalid("%q is not an option, and several options take input (%s): name one first, e.g. %q. %s",
			clip(t), strings.Join(names, ", "), with[0].opt.Action+" "+exampleInput(with[0]), Help(r.cli, r.frame))
	}
	c := with[0]
	if len(toks) == 1 && !strings.ContainsAny(t, " \t") {
		// A typo of an action: suggest only the nearest action, never
		// the input option (it may be critical, as reject is).
		var best *choice
		bestD := 0
		for _, o := range r.choices {
			if o != c && nearMiss(t, o.opt.Action) {
				if d := levenshtein(strings.ToLower(t), strings.ToLower(o.opt.Action), 3); best == nil || d < bestD {
					best, bestD = o, d
				}
			}
		}
		if best != nil {
			return "", nil, invalid("%q is not an option. Did you mean %q?", clip(t), best.opt.Action)
		}
	}
	if c.critical && len(r.choices) > 1 {
		return "", nil, invalid("%q is not an option. %s is critical, so free text does not fire it: name it, e.g. %q. %s",
			clip(t), describeChoice(c), c.opt.Action+" "+exampleInput(c), Help(r.cli, r.frame))
	}
	return r.withInput(c, raw, toks, fromText)
}

// withInput parses input text for c.
func (r *resolver) withInput(c *choice, raw string, toks []string, fromText bool) (string, map[string]any, error) {
	raw = strings.TrimSpace(raw)
	if len(c.expects) == 0 {
		return "", nil, invalid("%s takes no input; type just %q (or %d).", describeChoice(c), c.opt.Action, c.n)
	}
	if strings.HasPrefix(raw, "{") {
		return r.jsonInput(c, raw)
	}
	if len(c.expects) == 1 {
		var field, typ string
		for field, typ = range c.expects {
		}
		text := raw
		if after, ok := strings.CutPrefix(raw, field+"="); ok {
			text = after
			if fromText {
				if ts, err := splitWords(after); err == nil {
					toks = ts
				}
			}
		}
		if fromText && len(toks) == 1 && (strings.HasPrefix(text, `"`) || strings.HasPrefix(text, `'`)) {
			text = toks[0] // one quoted word: its quotes go
		}
		v, err := ParseValue(typ, text)
		if err != nil {
			return "", nil, invalid("%s: %s %s", describeChoice(c), field, strings.TrimSuffix(err.Error(), "."))
		}
		return c.opt.Action, map[string]any{field: v}, nil
	}
	input := map[string]any{}
	for _, tok := range toks {
		k, v, ok := strings.Cut(tok, "=")
		if !ok {
			return "", nil, invalid("%s expects %s: give them as key=value pairs, e.g. %q; %q is not one.",
				describeChoice(c), protocol.DescribeExpects(c.expects), c.opt.Action+" "+exampleInput(c), clip(tok))
		}
		typ, known := c.expects[k]
		if !known {
			return "", nil, invalid("%s does not take %q; it expects %s.", describeChoice(c), clip(k), protocol.DescribeExpects(c.expects))
		}
		if _, dup := input[k]; dup {
			return "", nil, invalid("%s: %s is given twice.", describeChoice(c), k)
		}
		pv, err := ParseValue(typ, v)
		if err != nil {
			return "", nil, invalid("%s: %s %s", describeChoice(c), k, strings.TrimSuffix(err.Error(), "."))
		}
		input[k] = pv
	}
	if missing := missingFields(c.expects, input); len(missing) > 0 {
		return "", nil, invalid("%s is missing %s; it expects %s, e.g. %q.", describeChoice(c), strings.Join(missing, ", "),
			protocol.DescribeExpects(c.expects), c.opt.Action+" "+exampleInput(c))
	}
	return c.opt.Action, input, nil
}

func (r *resolver) jsonInput(c *choice, raw string) (string, map[string]any, error) {
	m, err := protocol.DecodeObject([]byte(raw), 0)
	if err != nil {
		return "", nil, invalid("%s: the input is not a JSON object: %s", describeChoice(c), protocol.ErrorHint(err))
	}
	for k := range m {
		if _, ok := c.expects[k]; !ok {
			return "", nil, invalid("%s does not take %q; it expects %s.", describeChoice(c), clip(k), protocol.DescribeExpects(c.expects))
		}
	}
	if err := protocol.CheckExpects(c.expects, m); err != nil {
		return "", nil, invalid("%s: %s", describeChoice(c), protocol.ErrorHint(err))
	}
	return c.opt.Action, m, nil
}

func missingFields(expects map[string]string, input map[string]any) []string {
	var out []string
	for k := range expects {
		if _, ok := input[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func describeChoice(c *choice) string {
	if c.opt.Label != "" && c.opt.Label != c.opt.Action {
		return fmt.Sprintf("Option %d (%s, action %s)", c.n, c.opt.Label, c.opt.Action)
	}
	return fmt.Sprintf("Option %d (%s)", c.n, c.opt.Action)
}

// inputUsage tells how to give c's input.
func inputUsage(c *choice) string {
	if len(c.expects) == 1 {
		return fmt.Sprintf("Type %q, or just the value when no other option takes input.", c.opt.Action+" "+exampleInput(c))
	}
	return fmt.Sprintf("Type %q.", c.opt.Action+" "+exampleInput(c))
}

// exampleInput renders placeholder input for c: VALUE, or k=<type> pairs.
func exampleInput(c *choice) string {
	keys := make([]string, 0, len(c.expects))
	for k := range c.expects {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) == 1 {
		return "<" + keys[0] + ">"
	}
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=<" + c.expects[k] + ">"
	}
	return strings.Join(parts, " ")
}

// Help describes what can be typed at cli, for error messages and prompts:
// the option numbers, action names, keys, and how to give input.
func Help(cli protocol.CLI, frame protocol.Frame) string {
	r := newResolver(cli, frame)
	if len(r.choices) == 0 {
		if err := r.ready(); err != nil {
			return err.(*protocol.Error).Hint
		}
	}
	var b strings.Builder
	if len(r.choices) == 1 {
		b.WriteString("Type 1")
	} else {
		fmt.Fprintf(&b, "Type a number 1-%d", len(r.choices))
	}
	actions := make([]string, len(r.choices))
	var keys []string
	for i, c := range r.choices {
		actions[i] = c.opt.Action
		if k := normKeys(c.opt.Keys); k != "" {
			keys = append(keys, fmt.Sprintf("%s for %s", k, c.opt.Action))
		}
	}
	fmt.Fprintf(&b, ", an action (%s)", strings.Join(actions, ", "))
	if len(keys) > 0 {
		fmt.Fprintf(&b, " or a key (%s)", strings.Join(keys, ", "))
	}
	b.WriteString(".")
	var with []*choice
	for _, c := range r.choices {
		if len(c.expects) > 0 {
			with = append(with, c)
		}
	}
	for _, c := range with {
		fmt.Fprintf(&b, " %s takes %s: type %q", c.opt.Action, protocol.DescribeExpects(c.expects), c.opt.Action+" "+exampleInput(c))
		if len(with) == 1 && len(c.expects) == 1 && !(c.critical && len(r.choices) > 1) {
			b.WriteString(" or just the value")
		}
		b.WriteString(".")
	}
	return b.String()
}

// ParseValue converts text to a value of the canonical (or alias) type typ,
// as typed into a CLI: string as is; integer and number as decimal numbers
// (an integer gives int64, a number int64 when integral else float64);
// boolean as true/false, yes/no, y/n, on/off or 1/0; array as a JSON array,
// or comma-separated items (each a JSON scalar when it parses as one, else a
// string; "" is the empty array); object as a JSON object. Unknown types
// take the text as a string. Errors say what is expected.
func ParseValue(typ, text string) (any, error) {
	if canon, ok := protocol.NormalizeType(typ); ok {
		typ = canon
	}
	t := strings.TrimSpace(text)
	switch typ {
	case protocol.TypeInteger:
		if n, err := strconv.ParseInt(t, 10, 64); err == nil {
			return n, nil
		}
		if f, err := strconv.ParseFloat(t, 64); err == nil && f == math.Trunc(f) && math.Abs(f) < 1<<53 {
			return int64(f), nil
		}
		return nil, fmt.Errorf("must be an integer such as 42, not %q", clip(text))
	case protocol.TypeNumber:
		if n, err := strconv.ParseInt(t, 10, 64); err == nil {
			return n, nil
		}
		f, err := strconv.ParseFloat(t, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || strings.ContainsAny(t, "xXpP_") {
			return nil, fmt.Errorf("must be a number such as 12.5, not %q", clip(text))
		}
		return f, nil
	case protocol.TypeBoolean:
		switch strings.ToLower(t) {
		case "true", "yes", "y", "on", "1":
			return true, nil
		case "false", "no", "n", "off", "0":
			return false, nil
		}
		return nil, fmt.Errorf("must be true or false (or yes/no), not %q", clip(text))
	case protocol.TypeArray:
		if strings.HasPrefix(t, "[") {
			v, err := protocol.DecodeValue([]byte(t), 0)
			if err != nil {
				return nil, fmt.Errorf("must be a JSON array such as [1, 2] or a comma-separated list: %s", protocol.ErrorHint(err))
			}
			if _, ok := v.([]any); !ok {
				return nil, fmt.Errorf("must be a JSON array or a comma-separated list, not %q", clip(text))
			}
			return v, nil
		}
		out := []any{}
		if t == "" {
			return out, nil
		}
		for _, item := range strings.Split(t, ",") {
			item = strings.TrimSpace(item)
			if v, err := protocol.DecodeValue([]byte(item), 0); err == nil {
				switch v.(type) {
				case map[string]any, []any:
				default:
					out = append(out, v)
					continue
				}
			}
			out = append(out, item)
		}
		return out, nil
	case protocol.TypeObject:
		v, err := protocol.DecodeValue([]byte(t), 0)
		if err != nil {
			return nil, fmt.Errorf("must be a JSON object such as {\"k\": 1}: %s", protocol.ErrorHint(err))
		}
		if _, ok := v.(map[string]any); !ok {
			return nil, fmt.Errorf("must be a JSON object such as {\"k\": 1}, not %q", clip(text))
		}
		return v, nil
	}
	return text, nil
}

// cutWord splits t at its first run of white space.
func cutWord(t string) (first, rest string) {
	i := strings.IndexAny(t, " \t\r\n")
	if i < 0 {
		return t, ""
	}
	return t[:i], strings.TrimSpace(t[i:])
}

// splitWords splits s into words like a POSIX shell does, without any
// expansion: white space separates words; '…' quotes literally; "…" quotes
// with \" and \\ escapes; a backslash outside quotes escapes the next rune.
func splitWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); {
		ch, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
			i += size
		case ch == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, invalid("Unterminated ' quote in %q.", clip(s))
			}
			cur.WriteString(s[i+1 : i+1+j])
			inWord = true
			i += j + 2
		case ch == '"':
			i++
			closed := false
			for i < len(s) {
				c, sz := utf8.DecodeRuneInString(s[i:])
				if c == '"' {
					closed = true
					i += sz
					break
				}
				if c == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\') {
					cur.WriteByte(s[i+1])
					i += 2
					continue
				}
				cur.WriteRune(c)
				i += sz
			}
			if !closed {
				return nil, invalid("Unterminated \" quote in %q.", clip(s))
			}
			inWord = true
		case ch == '\\' && i+1 < len(s):
			c, sz := utf8.DecodeRuneInString(s[i+1:])
			cur.WriteRune(c)
			inWord = true
			i += 1 + sz
		default:
			cur.WriteRune(ch)
			inWord = true
			i += size
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// nearMiss reports whether typed looks like a misspelling of name.
func nearMiss(typed, name string) bool {
	a, b := strings.ToLower(typed), strings.ToLower(name)
	if a == b || len(a) < 3 || len(b) < 3 {
		return false
	}
	d := levenshtein(a, b, 3)
	if len(b) >= 5 {
		return d <= 2
	}
	return d <= 1
}

// levenshtein returns the edit distance of a and b, or max+1 when it is
// larger than max (and for long inputs, which are never near misses).
func levenshtein(a, b string, max int) int {
	ra, rb := []rune(a), []rune(b)
	if len(ra) > 64 || len(rb) > 64 {
		return max + 1
	}
	if d := len(ra) - len(rb); d > max || -d > max {
		return max + 1
	}
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// clip shortens s for messages.
func clip(s string) string {
	const n = 60
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}
