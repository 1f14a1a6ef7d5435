package wire

import (
	"encoding/json"
	"time"
)

// Invocation methods and output formats of a row (see package oip/row,
// which validates rows).
const (
	MethodExec  = "exec"  // run the argv directly, without a shell (the default)
	MethodShell = "shell" // run the quoted command string under /bin/sh
	FormatText  = "text"  // the command's output is plain text (the default)
	FormatJSON  = "json"  // the command prints one JSON value
)

// MaxTimeout is the largest timeout a row may ask for, in seconds (one day).
const MaxTimeout = 86400

// Row is one OIP directory row: how to build and run one CLI command. It is
// the one declaration of the row's shape: the API serves it as is, and
// package oip/row (Row is an alias of this type there) decodes and
// validates it (row.Decode, row.Validate).
type Row struct {
	// Command is the program to run: a name looked up on PATH or a path.
	Command string `json:"command"`
	// Description says what the command does, for people and agents.
	Description string `json:"description,omitempty"`
	// Args are the positional arguments, in order.
	Args []Param `json:"args,omitempty"`
	// Flags are the named options, in the order they are emitted.
	Flags []Param `json:"flags,omitempty"`
	// OutputFormat is FormatText or FormatJSON; empty means FormatText.
	OutputFormat string `json:"output_format,omitempty"`
	// InvocationMethod is MethodExec or MethodShell; empty means MethodExec.
	InvocationMethod string `json:"invocation_method,omitempty"`
	// SourceURL points at the command's source or release, if given.
	SourceURL string `json:"source_url,omitempty"`
	// Schema is an optional JSON Schema (an object) that the whole input
	// object must satisfy, on top of the per-param type checks.
	Schema json.RawMessage `json:"schema,omitempty"`
	// Timeout is our extension: the longest the command may run, in
	// seconds (fractions allowed, at most MaxTimeout). 0 means the
	// server's default.
	Timeout float64 `json:"timeout,omitempty"`
}

// Param is one positional arg or flag of a row.
type Param struct {
	// Name is the input key (oip/row.NamePattern). A flag named "output"
	// is emitted as --output unless it has a short alias.
	Name string `json:"name"`
	// Type is "string", "integer", "number", "boolean" or "array" (an
	// array of scalars).
	Type string `json:"type"`
	// Description says what the param means.
	Description string `json:"description,omitempty"`
	// Required makes the input key mandatory.
	Required bool `json:"required"`
	// Default is the param's default as raw JSON; nil means none (which
	// differs from a JSON null, which validation refuses). Args use it to
	// fill a gap before a later given arg; for flags it documents the
	// tool's own default, since absent flags are left out.
	Default json.RawMessage `json:"default,omitempty"`
	// ShortAlias, flags only, is a one-letter alias like "-v" that is
	// emitted instead of --name.
	ShortAlias string `json:"short_alias,omitempty"`
}

// Method returns the effective invocation method (MethodExec when empty).
func (r *Row) Method() string {
	if r.InvocationMethod == "" {
		return MethodExec
	}
	return r.InvocationMethod
}

// Format returns the effective output format (FormatText when empty).
func (r *Row) Format() string {
	if r.OutputFormat == "" {
		return FormatText
	}
	return r.OutputFormat
}

// TimeoutDuration returns Timeout as a duration; 0 means the server default.
// Out-of-range values (which validation refuses) give 0.
func (r *Row) TimeoutDuration() time.Duration {
	if !(r.Timeout > 0 && r.Timeout <= MaxTimeout) {
		return 0
	}
	return time.Duration(r.Timeout * float64(time.Second))
}

// Param returns the arg or flag called name.
func (r *Row) Param(name string) (*Param, bool) {
	for i := range r.Args {
		if r.Args[i].Name == name {
			return &r.Args[i], true
		}
	}
	for i := range r.Flags {
		if r.Flags[i].Name == name {
			return &r.Flags[i], true
		}
	}
	return nil, false
}

// IsFlag reports whether name is one of the row's flags (rather than an arg
// or unknown).
func (r *Row) IsFlag(name string) bool {
	for i := range r.Flags {
		if r.Flags[i].Name == name {
			return true
		}
	}
	return false
}

// InputKeys returns the names the input object may hold: args in order,
// then flags in order.
func (r *Row) InputKeys() []string {
	keys := make([]string, 0, len(r.Args)+len(r.Flags))
	for _, p := range r.Args {
		keys = append(keys, p.Name)
	}
	for _, p := range r.Flags {
		keys = append(keys, p.Name)
	}
	return keys
}

// DirectoryRow is one row of the directory listing, rendered as the seed's
// Directory Row object: key, type "cli", the row's fields, and the inv_ID
// of the version shown.
type DirectoryRow struct {
	Key  string `json:"key"`
	Type string `json:"type"` // "cli"
	Row
	InvID string `json:"inv_ID"`
}

// DirectoryPage is one page of the directory (GET /api/directory).
type DirectoryPage struct {
	Rows []DirectoryRow `json:"rows"`
	// Next is the cursor for the following page (pass it as after); ""
	// on the last page.
	Next string `json:"next,omitempty"`
	// NextCursor is the same position as an opaque cursor (pass it as
	// cursor); null on the last page.
	NextCursor *string `json:"next_cursor"`
}

// Command is a constructed command line (POST /api/commands/{key}).
type Command struct {
	// Argv is the exact argument vector; Argv[0] is the row's command.
	Argv []string `json:"argv"`
	// Line is the command as one string, every word quoted for POSIX sh:
	// for shell rows it is the string /bin/sh runs (equal to Shell), for
	// exec rows a display rendering of Argv.
	Line string `json:"command"`
	// Shell is set for shell rows only: the string to run with sh -c. It
	// is not part of the JSON.
	Shell string `json:"-"`
	// Method is the row's invocation method, MethodExec or MethodShell.
	Method string `json:"invocation_method"`
}
