package httpapi

import "net/http"

// VariablesPatch is variablesPatch, for the tests of package httpapi_test.
var VariablesPatch = variablesPatch

// RoutePatterns lists the patterns s registers on its mux, in order.
func RoutePatterns(s *Server) []string {
	var rec patternRecorder
	s.routes(&rec)
	return rec
}

type patternRecorder []string

func (p *patternRecorder) Handle(pattern string, _ http.Handler) { *p = append(*p, pattern) }
func (p *patternRecorder) HandleFunc(pattern string, _ func(http.ResponseWriter, *http.Request)) {
	*p = append(*p, pattern)
}
