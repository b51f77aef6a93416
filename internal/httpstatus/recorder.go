// Package httpstatus keeps the status an HTTP handler answered with, for the
// middlewares that report it (the request log, the request's trace span).
package httpstatus

import "net/http"

// Recorder is an http.ResponseWriter that remembers the first status
// written: Status is 0 until the handler writes, http.StatusOK when it
// writes a body without a header.
type Recorder struct {
	http.ResponseWriter
	Status int
}

// WriteHeader records code (the first one) and passes it on.
func (r *Recorder) WriteHeader(code int) {
	if r.Status == 0 {
		r.Status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

// Write records an implicit 200 and passes b on.
func (r *Recorder) Write(b []byte) (int, error) {
	if r.Status == 0 {
		r.Status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (r *Recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
