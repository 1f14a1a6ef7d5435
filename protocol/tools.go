package protocol

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strings"
)

// MaxToolNameLen is the longest tool name model hosts accept (OpenAI-style
// function names and MCP tool names: [a-zA-Z0-9_-]{1,64}).
const MaxToolNameLen = 64

// StageToolPrefix starts the tool name of a stage-bound tool, so that a
// stage tool never shadows an action of the same name.
const StageToolPrefix = "tool_"

// ToolName maps name (an action, or StageToolPrefix plus a stage tool's
// name) to a tool name model hosts accept: [a-zA-Z0-9_-]{1,64}. Every other
// character becomes "_"; a name longer than 64 characters is cut and ends
// with "_" and 8 hex digits of the SHA-256 of the whole name, so two long
// names that share their first 55 characters stay apart. "" becomes "_".
// Distinct names can map to one tool name ("a.b" and "a_b"); callers that
// list several tools resolve that with UniqueToolName.
func ToolName(name string) string {
	var b strings.Builder
	b.Grow(len(name))
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	s := b.String()
	if s == "" {
		return "_"
	}
	if len(s) > MaxToolNameLen {
		s = s[:MaxToolNameLen-9] + "_" + shortHash(name)
	}
	return s
}

// UniqueToolName returns the tool name for original (described by kind,
// e.g. "action" or "tool") that is not in taken: ToolName(original) when it
// is free, else that name cut to fit and suffixed with "_" and 8 hex digits
// of the SHA-256 of kind and original, so the result depends only on its
// inputs and the order callers assign names in (the first keeps the plain
// name). It does not add the result to taken.
func UniqueToolName(kind, original string, taken map[string]bool) string {
	name := ToolName(original)
	if !taken[name] {
		return name
	}
	seed := kind + ":" + original
	for i := 0; ; i++ {
		h := shortHash(seed)
		base := name
		if len(base) > MaxToolNameLen-9 {
			base = base[:MaxToolNameLen-9]
		}
		if c := base + "_" + h; !taken[c] {
			return c
		}
		seed += "'"
	}
}

func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:4])
}

// ExpectsSchema returns the JSON Schema of an `expects` map (field → type,
// aliases allowed) as tool definitions for models and MCP hosts carry it:
//
//	{"type": "object",
//	 "properties": {field: {"type": T, ...constraint}},
//	 "required": [every field, sorted],
//	 "additionalProperties": false}
//
// Types are as declared (a number is {"type": "number"}, an array is
// {"type": "array"} with its items unconstrained); a type this package does
// not know leaves the field untyped. constraints (nil = none) add minimum,
// maximum, enum, pattern and maxLength to their fields. Every expected
// field is required, because a transition refuses input that lacks one.
// Extra properties are refused in the schema although the server ignores
// extra keys (it merges only the expected ones): a model is told exactly
// the fields that matter, and strict tool modes demand it.
func ExpectsSchema(expects map[string]string, constraints map[string]Constraint) map[string]any {
	fields := make([]string, 0, len(expects))
	for k := range expects {
		fields = append(fields, k)
	}
	sort.Strings(fields)
	props := make(map[string]any, len(fields))
	for _, k := range fields {
		p := map[string]any{}
		if t, ok := NormalizeType(expects[k]); ok {
			p["type"] = t
		}
		if c, ok := constraints[k]; ok {
			if c.Minimum != nil {
				p["minimum"] = *c.Minimum
			}
			if c.Maximum != nil {
				p["maximum"] = *c.Maximum
			}
			if len(c.Enum) > 0 {
				p["enum"] = c.Enum
			}
			if c.Pattern != "" {
				p["pattern"] = c.Pattern
			}
			if c.MaxLength != nil {
				p["maxLength"] = *c.MaxLength
			}
		}
		props[k] = p
	}
	return map[string]any{
		"type":                 TypeObject,
		"properties":           props,
		"required":             fields,
		"additionalProperties": false,
	}
}
