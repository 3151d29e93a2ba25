package httpapi

// Routes lists the routes the server serves, "METHOD /path", for the tests.
func (s *Server) Routes() []string {
	var out []string
	for _, rt := range s.routes {
		out = append(out, rt.method+" "+rt.path)
	}
	return out
}
