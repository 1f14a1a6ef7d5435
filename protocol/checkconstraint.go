package protocol

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// CheckConstraints validates input against the constraints of its expected
// fields (field -> Constraint), after CheckExpects has checked their types.
// It returns an *Error (EInvalid) whose hint names the first field in
// sorted order that breaks a bound and the bound itself (e.g. `Field "a"
// must be at most 1000000, got 2000000.`), or nil. Fields absent from input
// are not checked here (CheckExpects reports them). Pattern follows JSON
// Schema: the string must contain a match (anchor it with ^…$ for a whole
// match).
func CheckConstraints(constraints map[string]Constraint, input map[string]any) error {
	if len(constraints) == 0 {
		return nil
	}
	keys := make([]string, 0, len(constraints))
	for k := range constraints {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v, ok := input[k]
		if !ok {
			continue
		}
		if msg := constraints[k].violation(v); msg != "" {
			return Errorf(EInvalid, "Field %q %s.", k, msg).With("field", k).With("constraint", constraints[k])
		}
	}
	return nil
}

// violation says how v breaks c ("must be at most 10, got 12"), or "".
func (c Constraint) violation(v any) string {
	if f, ok := numberValue(v); ok {
		if c.Minimum != nil && f < *c.Minimum {
			return fmt.Sprintf("must be at least %s, got %s", FormatNumber(*c.Minimum), FormatNumber(f))
		}
		if c.Maximum != nil && f > *c.Maximum {
			return fmt.Sprintf("must be at most %s, got %s", FormatNumber(*c.Maximum), FormatNumber(f))
		}
	}
	if s, ok := v.(string); ok {
		if c.MaxLength != nil && utf8.RuneCountInString(s) > *c.MaxLength {
			return fmt.Sprintf("must be at most %d characters long, got %d", *c.MaxLength, utf8.RuneCountInString(s))
		}
		if c.Pattern != "" {
			re, err := compilePattern(c.Pattern)
			if err != nil || !re.MatchString(s) {
				return fmt.Sprintf("must match the pattern %s", c.Pattern)
			}
		}
	}
	if len(c.Enum) > 0 && !enumHas(c.Enum, v) {
		return "must be one of " + describeEnum(c.Enum) + ", got " + describeValue(v)
	}
	return ""
}

// CheckPattern reports whether pattern is a valid RE2 expression, for
// load-time validation of workflow definitions.
func CheckPattern(pattern string) error {
	_, err := compilePattern(pattern)
	return err
}

var patterns sync.Map // pattern -> *regexp.Regexp

func compilePattern(p string) (*regexp.Regexp, error) {
	if re, ok := patterns.Load(p); ok {
		return re.(*regexp.Regexp), nil
	}
	re, err := regexp.Compile(p)
	if err != nil {
		return nil, fmt.Errorf("pattern %q: %w", p, err)
	}
	patterns.Store(p, re)
	return re, nil
}

// numberValue returns a decoded JSON number as a float64.
func numberValue(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case int32:
		return float64(x), true
	case uint64:
		return float64(x), true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}

// FormatNumber renders a number the way a person writes it: 2000000, 0.5,
// -3 (never 2e+06).
func FormatNumber(f float64) string {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

func enumHas(enum []any, v any) bool {
	if f, ok := numberValue(v); ok {
		for _, e := range enum {
			if g, ok := numberValue(e); ok && g == f {
				return true
			}
		}
		return false
	}
	want, err := json.Marshal(v)
	if err != nil {
		return false
	}
	for _, e := range enum {
		if got, err := json.Marshal(e); err == nil && string(got) == string(want) {
			return true
		}
	}
	return false
}

func describeEnum(enum []any) string {
	parts := make([]string, len(enum))
	for i, e := range enum {
		parts[i] = describeValue(e)
	}
	return strings.Join(parts, ", ")
}

func describeValue(v any) string {
	if f, ok := numberValue(v); ok {
		return FormatNumber(f)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
