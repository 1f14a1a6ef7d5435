// Package row holds the OIP directory row: the JSON object, dispatched with
// type "directory_row", that describes one CLI work object — its command,
// positional args, flags, output format, invocation method and an optional
// JSON Schema for the combined input (SPEC section 8).
//
// Decode turns a dispatch body into a validated *Row; Validate checks a Row
// built in Go. Every error is a *protocol.Error with code EInvalid whose hint
// names the offending field path (for example `flags[1].short_alias`), and
// whose Fields["field"] holds that path.
//
// Decisions where the specification is silent:
//
//   - timeout is our extension: a non-negative number of seconds, at most
//     MaxTimeout (one day); 0 or absent means the server's default.
//   - output_format defaults to "text" and invocation_method to "exec";
//     Decode fills both in, so a decoded row always carries them.
//   - A JSON null for an optional field means the field is absent, except for
//     default, where null is a value and is refused (no type accepts it); omit
//     default to give none.
//   - type is required on every param; there is no implicit "string".
//   - An array default holds scalars only (string, number, boolean), like
//     array input values.
//   - The body's "type" key may be absent, "directory_row" (the dispatch
//     kind) or "cli" (the row's category in the directory listing); any other
//     value is refused. Every other unknown key is refused.
//   - schema must be a JSON object. It is compiled as JSON Schema draft
//     2020-12 unless it names another draft in $schema; format keywords are
//     asserted; references outside the schema document are refused (nothing
//     is read from files or the network). Compiled schemas are cached per
//     schema text, process-wide, so a schema is compiled once.
//
// A Row holds no hidden state: all its methods only read it and are safe for
// concurrent use as long as nobody modifies the row at the same time.
package row
