// Package protocol holds the wire types of the Agent State Machine Protocol
// (ASMP): the State Frame, the dynamic CLI object, stream envelopes and the
// error body, plus the one error type that every layer of asmp returns.
//
// The types marshal exactly as the canonical JSON Schemas require
// (STATE_FRAME.json, CLI_SCHEMA.json): snake_case names, no extra
// properties, optional fields omitted when empty. Nothing in this package
// does I/O.
package protocol
