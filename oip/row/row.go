package row

import (
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"github.com/asmp-dev/asmp/oip/wire"
	"github.com/asmp-dev/asmp/protocol"
)

// Param value types. They are the canonical type names of package protocol.
const (
	TypeString  = protocol.TypeString
	TypeInteger = protocol.TypeInteger
	TypeNumber  = protocol.TypeNumber
	TypeBoolean = protocol.TypeBoolean
	TypeArray   = protocol.TypeArray
)

// Output formats and invocation methods.
const (
	FormatText  = wire.FormatText  // the command's output is plain text (the default)
	FormatJSON  = wire.FormatJSON  // the command prints one JSON value
	MethodExec  = wire.MethodExec  // run the argv directly, without a shell (the default)
	MethodShell = wire.MethodShell // run the quoted command string under /bin/sh
)

// MaxTimeout is the largest timeout a row may ask for, in seconds (one day).
const MaxTimeout = wire.MaxTimeout

// Patterns the validator enforces, quoted in hints.
const (
	NamePattern       = `^[A-Za-z_][A-Za-z0-9_-]*$`
	ShortAliasPattern = `^-[A-Za-z0-9]$`
)

// Row is one OIP directory row: how to build and run one CLI command. It is
// declared once, in package oip/wire (the API's shape); this package
// decodes (Decode) and validates (Validate, ValidateInput) it.
type Row = wire.Row

// Param is one positional arg or flag of a row (declared in oip/wire).
type Param = wire.Param

// DefaultValue returns the param's default decoded as protocol.DecodeValue
// does (int64, float64, string, bool, []any). ok is false when there is no
// default or it is not valid JSON.
func DefaultValue(p *Param) (v any, ok bool) {
	if p.Default == nil {
		return nil, false
	}
	v, err := parseJSON(p.Default)
	if err != nil {
		return nil, false
	}
	return v, true
}

// Validate checks the row against every rule of SPEC section 8 and returns
// an EInvalid *protocol.Error naming the first offending field, or nil. It
// does not modify r.
func Validate(r *Row) error {
	if r.Command == "" {
		return invalid("command", "command is required")
	}
	if strings.ContainsAny(r.Command, "\x00\n\r") || !utf8.ValidString(r.Command) {
		return invalid("command", "command %s must be UTF-8 without NUL bytes or line breaks", quoted(r.Command))
	}
	switch r.OutputFormat {
	case "", FormatText, FormatJSON:
	default:
		return invalid("output_format", "output_format %s must be %q or %q", quoted(r.OutputFormat), FormatJSON, FormatText)
	}
	switch r.InvocationMethod {
	case "", MethodExec, MethodShell:
	default:
		return invalid("invocation_method", "invocation_method %s must be %q or %q", quoted(r.InvocationMethod), MethodExec, MethodShell)
	}
	if r.SourceURL != "" && !absoluteURL(r.SourceURL) {
		return invalid("source_url", "source_url %s must be an absolute URL, http or https, such as https://example.com/tool", quoted(r.SourceURL))
	}
	if math.IsNaN(r.Timeout) || r.Timeout < 0 || r.Timeout > MaxTimeout {
		return invalid("timeout", "timeout %v must be a number of seconds from 0 (the server default) to %d", r.Timeout, MaxTimeout)
	}
	if err := validateParams(r); err != nil {
		return err
	}
	if r.Schema != nil {
		if _, err := compileSchema(r.Schema); err != nil {
			return err
		}
	}
	return nil
}

func validateParams(r *Row) error {
	optional := -1 // index of the first optional arg
	for i := range r.Args {
		p := &r.Args[i]
		if err := validateParam(p, "args", i, false); err != nil {
			return err
		}
		if p.ShortAlias != "" {
			path := pathOf("args", i)
			return invalid(path+".short_alias", "%s.short_alias: positional args take no short alias; make %q a flag to give it one", path, p.Name)
		}
		if p.Type == TypeArray && i != len(r.Args)-1 {
			path := pathOf("args", i)
			return invalid(path+".type", "%s %q is an array; only the last arg may be an array", path, p.Name)
		}
		if p.Required && optional >= 0 {
			path := pathOf("args", i)
			return invalid(path+".required", "%s %q is required but follows the optional args[%d] %q; put required args first",
				path, p.Name, optional, r.Args[optional].Name)
		}
		if !p.Required && optional < 0 {
			optional = i
		}
	}
	for i := range r.Flags {
		if err := validateParam(&r.Flags[i], "flags", i, true); err != nil {
			return err
		}
	}
	return checkUnique(r)
}

// pathOf renders a param's field path, like "flags[1]". Only error paths
// call it, so valid rows validate without formatting.
func pathOf(list string, i int) string {
	return list + "[" + strconv.Itoa(i) + "]"
}

// checkUnique refuses duplicate names (across args and flags) and duplicate
// short aliases. Small rows are compared pairwise; large ones use a map so
// a hostile row cannot make this quadratic.
func checkUnique(r *Row) error {
	n := len(r.Args) + len(r.Flags)
	at := func(i int) (*Param, string) {
		if i < len(r.Args) {
			return &r.Args[i], fmt.Sprintf("args[%d]", i)
		}
		return &r.Flags[i-len(r.Args)], fmt.Sprintf("flags[%d]", i-len(r.Args))
	}
	get := func(i int) *Param {
		if i < len(r.Args) {
			return &r.Args[i]
		}
		return &r.Flags[i-len(r.Args)]
	}
	dupName := func(first, second int) error {
		p, path := at(second)
		_, prev := at(first)
		return invalid(path+".name", "%s.name %q is already used by %s; names must be unique across args and flags", path, p.Name, prev)
	}
	dupAlias := func(first, second int) error {
		p, path := at(second)
		_, prev := at(first)
		return invalid(path+".short_alias", "%s.short_alias %q is already used by %s; short aliases must be unique", path, p.ShortAlias, prev)
	}
	if n <= 16 {
		for j := 1; j < n; j++ {
			pj := get(j)
			for i := 0; i < j; i++ {
				pi := get(i)
				if pi.Name == pj.Name {
					return dupName(i, j)
				}
				if pj.ShortAlias != "" && pi.ShortAlias == pj.ShortAlias {
					return dupAlias(i, j)
				}
			}
		}
		return nil
	}
	names := make(map[string]int, n)
	aliases := map[string]int{}
	for j := 0; j < n; j++ {
		pj := get(j)
		if i, ok := names[pj.Name]; ok {
			return dupName(i, j)
		}
		names[pj.Name] = j
		if pj.ShortAlias != "" {
			if i, ok := aliases[pj.ShortAlias]; ok {
				return dupAlias(i, j)
			}
			aliases[pj.ShortAlias] = j
		}
	}
	return nil
}

func validateParam(p *Param, list string, i int, flag bool) error {
	if validParam(p, flag) {
		return nil
	}
	path := pathOf(list, i)
	if err := explainParam(p, path, flag); err != nil {
		return err
	}
	return invalid(path, "%s is not a valid param", path) // unreachable: valid and explain agree
}

// validParam is the allocation-free check; explainParam says what it
// refused.
func validParam(p *Param, flag bool) bool {
	switch p.Type {
	case TypeString, TypeInteger, TypeNumber, TypeBoolean, TypeArray:
	default:
		return false
	}
	if !validName(p.Name) || flag && p.ShortAlias != "" && !validAlias(p.ShortAlias) {
		return false
	}
	if p.Default != nil && !(p.Type == TypeString && plainString(p.Default)) {
		v, err := parseJSON(p.Default)
		if err != nil || CheckValue(p.Type, v) != "" || badString(v) {
			return false
		}
	}
	return true
}

func explainParam(p *Param, path string, flag bool) error {
	if p.Name == "" {
		return invalid(path+".name", "%s.name is required", path)
	}
	if !validName(p.Name) {
		return invalid(path+".name", "%s.name %s must match %s", path, quoted(p.Name), NamePattern)
	}
	switch p.Type {
	case TypeString, TypeInteger, TypeNumber, TypeBoolean, TypeArray:
	case "":
		return invalid(path+".type", "%s.type is required: one of string, integer, number, boolean, array", path)
	default:
		return invalid(path+".type", "%s.type %s must be one of string, integer, number, boolean, array", path, quoted(p.Type))
	}
	if flag && p.ShortAlias != "" && !validAlias(p.ShortAlias) {
		return invalid(path+".short_alias", "%s.short_alias %s must match %s", path, quoted(p.ShortAlias), ShortAliasPattern)
	}
	if p.Default != nil {
		v, err := parseJSON(p.Default)
		if err != nil {
			return invalid(path+".default", "%s.default is not valid JSON", path)
		}
		if msg := CheckValue(p.Type, v); msg != "" {
			if !strings.HasPrefix(msg, "[") { // "[1] must be …" follows the path directly
				msg = " " + msg
			}
			return invalid(path+".default", "%s.default%s", path, msg)
		}
		if badString(v) {
			return invalid(path+".default", "%s.default must be UTF-8 without NUL bytes: a command line cannot carry them", path)
		}
	}
	return nil
}

// CheckValue checks a decoded JSON value (as protocol.DecodeValue returns
// it) against a param type and returns "" or a phrase such as "must be an
// integer, got 1.5". Integers may be integral floats; array elements must be
// strings, numbers or booleans.
func CheckValue(typ string, v any) string {
	switch typ {
	case TypeString:
		if _, ok := v.(string); ok {
			return ""
		}
	case TypeBoolean:
		if _, ok := v.(bool); ok {
			return ""
		}
	case TypeInteger:
		switch x := v.(type) {
		case int64:
			return ""
		case float64:
			if x == math.Trunc(x) && !math.IsInf(x, 0) {
				return ""
			}
			return "must be an integer, got " + strconv.FormatFloat(x, 'g', -1, 64)
		}
	case TypeNumber:
		switch v.(type) {
		case int64, float64:
			return ""
		}
	case TypeArray:
		a, ok := v.([]any)
		if !ok {
			break
		}
		for i, e := range a {
			switch e.(type) {
			case string, bool, int64, float64:
			default:
				return fmt.Sprintf("[%d] must be a string, number or boolean, got %s", i, protocol.TypeOf(e))
			}
		}
		return ""
	default:
		return "has an unknown type"
	}
	return fmt.Sprintf("must be %s %s, got %s", article(typ), typ, protocol.TypeOf(v))
}

func article(t string) string {
	if t == TypeInteger || t == TypeArray {
		return "an"
	}
	return "a"
}

// badString reports whether a string default, or a string in an array
// default, holds a NUL byte or is not UTF-8.
func badString(v any) bool {
	switch x := v.(type) {
	case string:
		return strings.IndexByte(x, 0) >= 0 || !utf8.ValidString(x)
	case []any:
		for _, e := range x {
			if badString(e) {
				return true
			}
		}
	}
	return false
}

// lastURL remembers the last URL absoluteURL accepted: rows are validated
// again on every command build, and parsing is the costly part.
var lastURL atomic.Pointer[string]

// absoluteURL reports whether s parses as an absolute http or https URL
// with a host.
func absoluteURL(s string) bool {
	if p := lastURL.Load(); p != nil && *p == s {
		return true
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return false // a link for people to follow: http or https only, never javascript: or data:
	}
	lastURL.Store(&s)
	return true
}

func validName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c == '_':
		case i > 0 && (c >= '0' && c <= '9' || c == '-'):
		default:
			return false
		}
	}
	return s != ""
}

func validAlias(s string) bool {
	if len(s) != 2 || s[0] != '-' {
		return false
	}
	c := s[1]
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
}

// parseJSON decodes one JSON value with protocol.DecodeValue, with fast
// paths for the literals and plain strings that defaults usually are.
func parseJSON(raw []byte) (any, error) {
	switch string(raw) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	if plainString(raw) {
		return string(raw[1 : len(raw)-1]), nil
	}
	return protocol.DecodeValue(raw, 0)
}

// plainString reports whether raw is a JSON string of printable ASCII
// without escapes, whose value is the bytes between the quotes.
func plainString(raw []byte) bool {
	n := len(raw)
	if n < 2 || raw[0] != '"' || raw[n-1] != '"' {
		return false
	}
	for _, c := range raw[1 : n-1] {
		if c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// invalid returns an EInvalid error whose hint is the formatted text and
// whose "field" is the path.
func invalid(field, format string, args ...any) *protocol.Error {
	e := protocol.Errorf(protocol.EInvalid, format, args...)
	e.Fields = map[string]any{"field": field}
	return e
}

// quoted renders a user-supplied string for a hint, shortened if long.
func quoted(s string) string {
	const max = 60
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return strconv.Quote(s[:cut]) + "…"
	}
	return strconv.Quote(s)
}
