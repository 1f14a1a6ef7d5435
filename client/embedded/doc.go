// Package embedded drives ASMP workflows in the same process, with no
// server: New wraps an *engine.Engine in a client.Backend, the way the
// TypeScript SDK's local FSM does.
//
//	eng, err := engine.New(memstore.New(), []*workflow.Definition{def}, nil)
//	var b client.Backend = embedded.New(eng)
//	run, err := b.StartRun(ctx, "", nil)
//	next, err := b.Transition(ctx, run.RunID, "start", nil, nil)
//
// It behaves as the HTTP API does: the same frames (with hrefs under
// BaseURL), the same *client.Error values with the statuses and hints a
// server would answer, inputs and results passed through JSON, and streams
// with the contract of (*client.Client).Stream. It only translates: the
// engine's use cases decide (Lookup, Submit in the documented order of
// refusals, Follow), the same ones the HTTP API calls. The shared test
// table of package client runs against both backends. NewWith sets the
// base URL, the actor and the scopes (the server's /mcp endpoint drives
// its engine this way, as the MCP request's principal).
//
// This package is opt-in: it imports the engine (workflow definitions,
// expressions, metrics) and so pulls in what a server does. Programs that
// only talk to a remote server import package client alone, which needs
// nothing outside the standard library.
package embedded
