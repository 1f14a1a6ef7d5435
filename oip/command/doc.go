// Package command builds the exact command line of an OIP directory row for
// one input object, following every rule of SPEC section 8:
//
//  1. The input may hold only the row's arg and flag names; required ones
//     must be present and every value must have its param's type. Then the
//     whole input is checked against the row's JSON Schema, if any.
//  2. Positional args come in declared order. A missing optional arg that is
//     followed by a given one takes its default; trailing missing args are
//     left out. The last arg may be an array and expands to one positional
//     per element.
//  3. Flags come in declared order, as the short alias when there is one and
//     as --name otherwise. A boolean flag is the flag alone when true and
//     nothing when false; other flags are the flag followed by the value;
//     an array flag is repeated per element. Absent flags are left out.
//  4. Strings pass unchanged; numbers print in shortest exact decimal form.
//  5. The order is command, positionals, flags. If any positional value
//     starts with "-", the order is command, flags, "--", positionals. A
//     flag value that starts with "-" is emitted as one word --name=value.
//  6. exec rows give the argv; shell rows also give one POSIX sh string in
//     which every word is quoted, so /bin/sh parses it back to exactly argv.
//
// Decisions where the specification is silent:
//
//   - Accepted Go values: string; bool; int64, float64 and json.Number (what
//     protocol.DecodeValue and json.Decoder.UseNumber give); every Go
//     integer and float type. An integer param takes an integral float
//     (2.0 → "2"); a number param takes any finite number. null is not a
//     value of any type: leave the key out instead.
//   - An array value is a []any (or []string) of scalars — strings, numbers
//     or booleans — printed like scalar values. Nested arrays, objects and
//     nulls are refused. An empty array emits nothing.
//   - Number formatting: integers print as integers, floats with
//     strconv.FormatFloat(f, 'f', -1, 64): the shortest digits that read back
//     as the same float64, never with an exponent (1e21 prints as
//     1000000000000000000000), because many tools' number parsers reject
//     exponents. -0 prints as 0. An integer json.Number prints its digits
//     exactly, however long. NaN and infinities are refused.
//   - A boolean positional arg prints as true or false.
//   - A flag value starting with "-" always uses the long form --name=value,
//     even when the flag has a short alias: "-o=-x" is not understood the
//     same way by every option parser, "--output=-x" is. An array flag uses
//     that form for each such element.
//   - Strings holding a NUL byte cannot be part of an argv, and strings that
//     are not valid UTF-8 cannot come from JSON (and POSIX shell parsers
//     such as mvdan.cc/sh refuse them); both are refused (EInvalid) for both
//     methods.
//   - Shell quoting is mvdan.cc/sh/v3's syntax.Quote with LangPOSIX. For
//     strings it refuses in POSIX mode (those with non-printable characters
//     such as newline or tab, which it would only write as bash's $'...'),
//     we use plain POSIX single quotes, where every byte but NUL is literal;
//     a single quote inside is written as quote, backslash, quote, quote,
//     and a CR directly before an LF ends one quoted run and the LF starts
//     the next, since mvdan.cc/sh reads CR LF as a newline even inside
//     quotes. The command name is quoted the same way, so it stays as given
//     exactly when it is a plain word.
//
// For example, the argv ["grep", "it's", "a\nb", "*.go"] renders as
//
//	grep "it's" 'a
//	b' '*.go'
//
// Performance: Compile validates a row and precomputes its flag words and
// rendered defaults into a Builder, whose Build does only the per-input
// work; reuse a Builder when building many commands for one row. Build is
// Compile followed by Builder.Build. Row JSON Schemas are compiled once per
// schema text (see package row). Errors are *protocol.Error values with
// code EInvalid whose hint names the input key; Fields["field"] holds it.
package command
