package httpapi

import (
	"net/http"

	"github.com/flowd/flowd/tracing"
)

// withTracing makes a span of every request when Config.TracerProvider is
// set, named after the route mux matches; without one it adds nothing.
func (s *Server) withTracing(mux *http.ServeMux, next http.Handler) http.Handler {
	return tracing.HTTPHandler(s.cfg.TracerProvider, next, func(r *http.Request) string {
		_, pattern := mux.Handler(r)
		return tracing.RoutePattern(pattern)
	})
}
