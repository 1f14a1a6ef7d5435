package mcpbridge

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/asmp-dev/asmp/client"
)

// execGate follows the token of the stdio bridge: whether an invocation
// it asks to execute runs is what GET /whoami answers (the server runs
// with --allow-exec and the token holds exec). It is read at start, again
// while no answer came (the server was unreachable), and after an
// executing call was refused (the server's tokens may have changed).
type execGate struct {
	c   *client.Client
	log *slog.Logger

	mu    sync.Mutex
	known bool
	exec  bool
}

// allowed reports whether a row tool call asks to execute.
func (g *execGate) allowed(ctx context.Context) bool {
	g.mu.Lock()
	known, exec := g.known, g.exec
	g.mu.Unlock()
	if known {
		return exec
	}
	return g.read(ctx)
}

// read asks the server and reports whether the token's executions run. A
// refusal of the server (a token without read, a server without the
// route) counts as no; an unreachable server leaves the answer unknown,
// to be asked again at the next call.
func (g *execGate) read(ctx context.Context) bool {
	id, err := g.c.WhoAmI(ctx)
	var ce *client.Error
	switch {
	case err == nil:
	case errors.As(err, &ce):
		g.log.Warn("GET /whoami was refused: row tools build their commands without executing them", "status", ce.Status, "hint", ce.Hint)
		id = &client.Identity{}
	default:
		g.log.Warn("GET /whoami failed: row tools build their commands until it answers", "err", err)
		return false
	}
	g.mu.Lock()
	g.known, g.exec = true, id.Exec
	g.mu.Unlock()
	return id.Exec
}

// execute reports whether the row tool call of ctx asks to execute.
func (s *session) execute(ctx context.Context) bool {
	switch {
	case s.opts.Execute != nil:
		return s.opts.Execute(ctx)
	case s.gate != nil:
		return s.gate.allowed(ctx)
	}
	return false
}

// mayStillExecute is asked after an executing call was refused: it reads
// the token's identity again, and reports whether execution is still
// allowed (when not, the call is made again to build the command only).
func (s *session) mayStillExecute(ctx context.Context) bool {
	if s.gate == nil {
		return true
	}
	return s.gate.read(ctx)
}
