package server

// EdgeScopes returns the scope of every route of s's edge, by pattern
// ("METHOD /path"), so that tests can hold every route to its scope.
func EdgeScopes(s *Server) map[string]string {
	m := map[string]string{}
	for _, rt := range s.edge.Routes() {
		m[rt.Method+" "+rt.Path] = rt.Scope
	}
	return m
}
