package command

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/asmp-dev/asmp/oip/row"
	"github.com/asmp-dev/asmp/oip/wire"
	"github.com/asmp-dev/asmp/protocol"
)

// Command is a constructed command line (its JSON is the answer of POST
// /api/commands/{key}).
type Command = wire.Command

type kind uint8

const (
	kString kind = iota
	kInteger
	kNumber
	kBoolean
	kArray
)

var kinds = map[string]kind{
	row.TypeString:  kString,
	row.TypeInteger: kInteger,
	row.TypeNumber:  kNumber,
	row.TypeBoolean: kBoolean,
	row.TypeArray:   kArray,
}

func (k kind) String() string {
	switch k {
	case kString:
		return "a string"
	case kInteger:
		return "an integer"
	case kNumber:
		return "a number"
	case kBoolean:
		return "a boolean"
	}
	return "an array of strings, numbers or booleans"
}

// param is one arg or flag, with everything Build needs precomputed.
type param struct {
	name   string
	typ    kind
	req    bool
	token  string // flags: the short alias or --name
	def    string // args: the rendered default
	hasDef bool
}

// Builder builds commands for one validated row. It is immutable and safe
// for concurrent use.
type Builder struct {
	row    *row.Row
	cmd    string
	method string
	args   []param
	flags  []param
}

// Compile validates r (see row.Row.Validate) and precomputes what every
// Build needs. The Builder keeps r for its JSON Schema, so r must not be
// modified while the Builder is in use.
func Compile(r *row.Row) (*Builder, error) {
	if r == nil {
		return nil, protocol.Errorf(protocol.EInvalid, "no directory row to build a command from")
	}
	if err := row.Validate(r); err != nil {
		return nil, err
	}
	b := &Builder{row: r, cmd: r.Command, method: r.Method()}
	params := make([]param, len(r.Args)+len(r.Flags))
	b.args, b.flags = params[:len(r.Args):len(r.Args)], params[len(r.Args):]
	for i := range r.Args {
		p := &r.Args[i]
		q := param{name: p.Name, typ: kinds[p.Type], req: p.Required}
		if v, ok := row.DefaultValue(p); ok && q.typ != kArray {
			s, msg := scalar(q.typ, v)
			if msg != "" {
				// Validate accepted it, so this is a Go-built row whose
				// default we cannot print; say which.
				return nil, protocol.Errorf(protocol.EInvalid, "args[%d].default %s", i, msg).With("field", fmt.Sprintf("args[%d].default", i))
			}
			q.def, q.hasDef = s, true
		}
		b.args[i] = q
	}
	for i := range r.Flags {
		p := &r.Flags[i]
		q := param{name: p.Name, typ: kinds[p.Type], req: p.Required, token: p.ShortAlias}
		if q.token == "" {
			q.token = "--" + p.Name
		}
		b.flags[i] = q
	}
	return b, nil
}

// Build constructs the command for input from row r: Compile(r) followed by
// Builder.Build(input).
func Build(r *row.Row, input map[string]any) (*Command, error) {
	b, err := Compile(r)
	if err != nil {
		return nil, err
	}
	return b.Build(input)
}

// value is one input value after type checking and rendering.
type value struct {
	raw     any      // the input value
	present bool     // the key is in the input
	set     bool     // raw was converted
	on      bool     // booleans
	s       string   // scalars
	list    []string // arrays
}

// Build constructs the command for one input object (keys are arg and flag
// names). Errors are EInvalid *protocol.Error values naming the input key.
func (b *Builder) Build(input map[string]any) (*Command, error) {
	n := len(b.args) + len(b.flags)
	var buf [16]value
	vals := buf[:0]
	if n > len(buf) {
		vals = make([]value, 0, n)
	}
	vals = vals[:n]

	// Step 1: unknown keys, then each param in declared order.
	found := 0
	for i := 0; i < n; i++ {
		if v, ok := input[b.param(i).name]; ok {
			vals[i].raw, vals[i].present = v, true
			found++
		}
	}
	if found != len(input) {
		return nil, b.unknown(input)
	}
	for i := 0; i < n; i++ {
		p := b.param(i)
		if !vals[i].present {
			if p.req {
				return nil, b.missing(i)
			}
			continue
		}
		if msg := convert(p.typ, vals[i].raw, &vals[i]); msg != "" {
			return nil, invalid(p.name, "input %q %s", p.name, msg)
		}
	}
	if b.row.Schema != nil {
		if err := row.ValidateInput(b.row, schemaInput(input)); err != nil {
			return nil, err
		}
	}

	// Step 2: positionals, filling gaps before the last given arg.
	last := -1
	for i := range b.args {
		if vals[i].set {
			last = i
		}
	}
	count, dash := 1, false
	for i := 0; i <= last; i++ {
		v, p := &vals[i], &b.args[i]
		switch {
		case !v.set && !p.hasDef:
			later := b.args[last].name
			return nil, invalid(p.name, "input %q is missing: the later arg %q is given, and %q has no default to fill its place; give %q too",
				p.name, later, p.name, p.name)
		case !v.set:
			v.s = p.def
			dash = dash || strings.HasPrefix(v.s, "-")
			count++
		case p.typ == kArray:
			for _, s := range v.list {
				dash = dash || strings.HasPrefix(s, "-")
			}
			count += len(v.list)
		default:
			dash = dash || strings.HasPrefix(v.s, "-")
			count++
		}
	}
	// Step 3: flags (counted first so argv is allocated once).
	for i := range b.flags {
		v := &vals[len(b.args)+i]
		switch {
		case !v.set:
		case b.flags[i].typ == kBoolean:
			if v.on {
				count++
			}
		case b.flags[i].typ == kArray:
			count += 2 * len(v.list)
		default:
			count += 2
		}
	}
	if dash {
		count++
	}

	// Step 5: order.
	argv := make([]string, 0, count)
	argv = append(argv, b.cmd)
	if dash {
		argv = b.appendFlags(argv, vals)
		argv = append(argv, "--")
		argv = b.appendArgs(argv, vals, last)
	} else {
		argv = b.appendArgs(argv, vals, last)
		argv = b.appendFlags(argv, vals)
	}

	// Step 6.
	c := &Command{Argv: argv, Line: Render(argv), Method: b.method}
	if b.method == row.MethodShell {
		c.Shell = c.Line
	}
	return c, nil
}

// schemaInput returns input with []string values turned into []any, the
// form a JSON Schema validator knows as an array. It copies only if needed.
func schemaInput(input map[string]any) map[string]any {
	var out map[string]any
	for k, v := range input {
		a, ok := v.([]string)
		if !ok {
			continue
		}
		if out == nil {
			out = make(map[string]any, len(input))
			for k2, v2 := range input {
				out[k2] = v2
			}
		}
		l := make([]any, len(a))
		for i, s := range a {
			l[i] = s
		}
		out[k] = l
	}
	if out == nil {
		return input
	}
	return out
}

func (b *Builder) param(i int) *param {
	if i < len(b.args) {
		return &b.args[i]
	}
	return &b.flags[i-len(b.args)]
}

func (b *Builder) appendArgs(argv []string, vals []value, last int) []string {
	for i := 0; i <= last; i++ {
		if b.args[i].typ == kArray && vals[i].set {
			argv = append(argv, vals[i].list...)
		} else {
			argv = append(argv, vals[i].s)
		}
	}
	return argv
}

func (b *Builder) appendFlags(argv []string, vals []value) []string {
	for i := range b.flags {
		p, v := &b.flags[i], &vals[len(b.args)+i]
		switch {
		case !v.set:
		case p.typ == kBoolean:
			if v.on {
				argv = append(argv, p.token)
			}
		case p.typ == kArray:
			for _, s := range v.list {
				argv = appendFlag(argv, p, s)
			}
		default:
			argv = appendFlag(argv, p, v.s)
		}
	}
	return argv
}

func appendFlag(argv []string, p *param, s string) []string {
	if strings.HasPrefix(s, "-") {
		return append(argv, "--"+p.name+"="+s)
	}
	return append(argv, p.token, s)
}

func (b *Builder) missing(i int) error {
	p := b.param(i)
	what := "flag"
	if i < len(b.args) {
		what = "arg"
	}
	typ := strings.TrimPrefix(strings.TrimPrefix(p.typ.String(), "an "), "a ")
	return invalid(p.name, "missing required input %q (%s, %s)", p.name, what, typ)
}

func (b *Builder) unknown(input map[string]any) error {
	var bad []string
	for k := range input {
		if !b.has(k) {
			bad = append(bad, k)
		}
	}
	sort.Strings(bad)
	if len(bad) == 0 { // cannot happen; keep the error honest anyway
		return protocol.Errorf(protocol.EInvalid, "the input has unknown keys")
	}
	keys := b.row.InputKeys()
	allowed := "none: this row takes no input"
	if len(keys) > 0 {
		allowed = strings.Join(keys, ", ")
	}
	return invalid(bad[0], "unknown input key %s; this row takes: %s", strconv.Quote(bad[0]), allowed)
}

func (b *Builder) has(name string) bool {
	for i := 0; i < len(b.args)+len(b.flags); i++ {
		if b.param(i).name == name {
			return true
		}
	}
	return false
}

// convert type-checks v for a param of type t and renders it into out. It
// returns "" or a phrase for the hint ("must be a boolean, got string").
func convert(t kind, v any, out *value) string {
	out.set = true
	switch t {
	case kBoolean:
		bv, ok := v.(bool)
		if !ok {
			return "must be a boolean, got " + protocol.TypeOf(v)
		}
		out.on, out.s = bv, strconv.FormatBool(bv)
		return ""
	case kArray:
		switch a := v.(type) {
		case []any:
			out.list = make([]string, len(a))
			for i, e := range a {
				s, msg := scalar(kArray, e)
				if msg != "" {
					return fmt.Sprintf("[%d] %s", i, msg)
				}
				out.list[i] = s
			}
			return ""
		case []string:
			for i, s := range a {
				if msg := checkString(s); msg != "" {
					return fmt.Sprintf("[%d] %s", i, msg)
				}
			}
			out.list = a
			return ""
		}
		return "must be an array of strings, numbers or booleans, got " + protocol.TypeOf(v)
	}
	s, msg := scalar(t, v)
	out.s = s
	return msg
}

// checkString refuses strings no command line can carry (NUL bytes) and
// strings that are not UTF-8 (JSON cannot carry them, and POSIX shell
// parsers such as mvdan.cc/sh refuse them).
func checkString(s string) string {
	if strings.IndexByte(s, 0) >= 0 {
		return "must not contain NUL bytes: a command line cannot carry them"
	}
	if !utf8.ValidString(s) {
		return "must be valid UTF-8"
	}
	return ""
}

// scalar renders one scalar of type t (kArray means any scalar, as an
// array element) or returns a phrase saying why it cannot.
func scalar(t kind, v any) (string, string) {
	switch x := v.(type) {
	case string:
		if t != kString && t != kArray {
			break
		}
		return x, checkString(x)
	case bool:
		if t == kArray || t == kBoolean {
			return strconv.FormatBool(x), ""
		}
	case int64:
		return integer(t, x, v)
	case int:
		return integer(t, int64(x), v)
	case int8:
		return integer(t, int64(x), v)
	case int16:
		return integer(t, int64(x), v)
	case int32:
		return integer(t, int64(x), v)
	case uint8:
		return integer(t, int64(x), v)
	case uint16:
		return integer(t, int64(x), v)
	case uint32:
		return integer(t, int64(x), v)
	case uint:
		return unsigned(t, uint64(x), v)
	case uint64:
		return unsigned(t, x, v)
	case uintptr:
		return unsigned(t, uint64(x), v)
	case float64:
		return float(t, x, v)
	case float32:
		return float(t, float64(x), v)
	case json.Number:
		return number(t, x)
	}
	return "", "must be " + t.String() + ", got " + protocol.TypeOf(v)
}

func numeric(t kind) bool { return t == kInteger || t == kNumber || t == kArray }

func integer(t kind, i int64, v any) (string, string) {
	if !numeric(t) {
		return "", "must be " + t.String() + ", got " + protocol.TypeOf(v)
	}
	return strconv.FormatInt(i, 10), ""
}

func unsigned(t kind, u uint64, v any) (string, string) {
	if !numeric(t) {
		return "", "must be " + t.String() + ", got " + protocol.TypeOf(v)
	}
	return strconv.FormatUint(u, 10), ""
}

func float(t kind, f float64, v any) (string, string) {
	if !numeric(t) {
		return "", "must be " + t.String() + ", got " + protocol.TypeOf(v)
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "", "must be a finite number, got " + strconv.FormatFloat(f, 'g', -1, 64)
	}
	if t == kInteger && f != math.Trunc(f) {
		return "", "must be an integer, got " + strconv.FormatFloat(f, 'g', -1, 64)
	}
	if f == 0 {
		return "0", "" // also for -0
	}
	return strconv.FormatFloat(f, 'f', -1, 64), ""
}

// number renders a json.Number. Integer literals keep their digits exactly;
// others go through float64.
func number(t kind, n json.Number) (string, string) {
	if !numeric(t) {
		return "", "must be " + t.String() + ", got number"
	}
	s := string(n)
	isInt, ok := jsonNumber(s)
	if !ok {
		return "", "must be " + t.String() + ", got the malformed number " + strconv.Quote(protocol.Truncate(s, 40))
	}
	if isInt {
		if strings.Trim(s, "-0") == "" {
			return "0", ""
		}
		return s, ""
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return "", "must be a number within float64 range, got " + protocol.Truncate(s, 40)
	}
	return float(t, f, f)
}

// jsonNumber reports whether s is a JSON number (RFC 8259) and whether it
// is an integer literal (no fraction, no exponent).
func jsonNumber(s string) (isInt, ok bool) {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	digits := func() int {
		j := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i - j
	}
	start := i
	if d := digits(); d == 0 || (d > 1 && s[start] == '0') {
		return false, false
	}
	isInt = true
	if i < len(s) && s[i] == '.' {
		i++
		isInt = false
		if digits() == 0 {
			return false, false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		isInt = false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false, false
		}
	}
	if i != len(s) {
		return false, false
	}
	return isInt, true
}

func invalid(field, format string, args ...any) error {
	e := protocol.Errorf(protocol.EInvalid, format, args...)
	e.Fields = map[string]any{"field": field}
	return e
}
