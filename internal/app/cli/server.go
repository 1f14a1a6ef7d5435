package cli

// DefaultServer is the server a client command talks to when nothing names
// one: where a bare `asmp serve` listens.
const DefaultServer = "http://127.0.0.1:8000"

// serverHelp describes --server the same way on every client command.
const serverHelp = "ASMP server base URL (default: $ASMP_URL, else the run's remembered server, else " + DefaultServer + ")"

// serverFor is the one rule every client command follows to find its
// server: flag (--server or a URL argument), else $ASMP_URL, else the
// server remembered for runID (when given), else DefaultServer.
func serverFor(env *Env, flag, runID string) string {
	if flag != "" {
		return flag
	}
	if u := agentGetenv(env)("ASMP_URL"); u != "" {
		return u
	}
	if runID != "" {
		if st, err := agentState(env); err == nil {
			if e, ok, err := st.Lookup(runID); err == nil && ok {
				return e.Server
			}
		}
	}
	return DefaultServer
}

// serverSource says why serverFor chose its server, for hints.
func serverSource(env *Env, flag, runID string) string {
	switch {
	case flag != "":
		return "as --server says"
	case agentGetenv(env)("ASMP_URL") != "":
		return "as $ASMP_URL says"
	}
	if runID != "" {
		if st, err := agentState(env); err == nil {
			if _, ok, err := st.Lookup(runID); err == nil && ok {
				return "the server this run was remembered on"
			}
		}
	}
	return "the default: no --server, no $ASMP_URL and no server remembered for this run"
}
