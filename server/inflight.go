package server

import (
	"net/http"
	"sync/atomic"
)

// inflight counts the HTTP handlers running, so that a shutdown cut short
// can tell requests it interrupted from connections merely not yet idle.
type inflight struct{ n atomic.Int64 }

func (f *inflight) count(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.n.Add(1)
		defer f.n.Add(-1)
		next.ServeHTTP(w, r)
	})
}

func (f *inflight) running() int64 { return f.n.Load() }
