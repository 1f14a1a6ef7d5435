package protocol

// Constraint bounds one expected field beyond its type (workflow files'
// `expects: {field: {type, minimum, maximum, enum, pattern, maxLength}}`).
// Frames carry only the field's type (the frame schema allows nothing
// more); tool definitions built for models and MCP hosts carry the
// constraint too. The zero value constrains nothing.
type Constraint struct {
	// Minimum and Maximum bound a number or integer, inclusive.
	Minimum *float64 `json:"minimum,omitempty"`
	Maximum *float64 `json:"maximum,omitempty"`
	// Enum lists the allowed values (JSON values of the field's type).
	Enum []any `json:"enum,omitempty"`
	// Pattern is a regular expression (RE2 syntax) a string must match.
	Pattern string `json:"pattern,omitempty"`
	// MaxLength bounds a string's length in characters (Unicode code points).
	MaxLength *int `json:"maxLength,omitempty"`
}

// IsZero reports whether c constrains nothing.
func (c Constraint) IsZero() bool {
	return c.Minimum == nil && c.Maximum == nil && len(c.Enum) == 0 && c.Pattern == "" && c.MaxLength == nil
}
