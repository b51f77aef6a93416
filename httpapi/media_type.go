package httpapi

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
)

// mediaTypes lists the Content-Types a route takes for its body. A body with
// any other Content-Type is refused with 415 and read no further: browsers
// send text/plain, form and multipart bodies to other sites without asking
// first, so taking only JSON (and YAML) media types keeps such a page from
// writing through a route, besides saying honestly what the route reads.
//
// A body without a Content-Type is read as the route's JSON, as before:
// browsers always name a type for a string or form body, and a page that
// sends a typeless body (a Blob) to another origin also sends its Origin,
// which the origin check refuses.
type mediaTypes []string

var (
	// jsonBody: the control bodies.
	jsonBody = mediaTypes{"application/json"}
	// mergePatchBody: PATCH /v1/workflows/{id}, a JSON Merge Patch (RFC 7396).
	mergePatchBody = mediaTypes{"application/merge-patch+json", "application/json"}
	// definitionBody: PUT /v1/definitions/{name}, YAML or JSON. The YAML
	// types besides application/yaml (RFC 9512) are the ones tools still
	// send; none of them is a type browsers send across sites unasked.
	definitionBody = mediaTypes{"application/json", "application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml"}
)

// check returns a 415 error unless r has no Content-Type or one of m's
// (parameters such as charset are allowed).
func (m mediaTypes) check(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return nil
	}
	if mt, _, err := mime.ParseMediaType(ct); err == nil {
		for _, want := range m {
			if mt == want {
				return nil
			}
		}
	}
	return httpError(http.StatusUnsupportedMediaType, fmt.Sprintf(
		"Content-Type %q is not supported on this route: send %s", ct, strings.Join(m, " or ")))
}

// takes serves h after checking the Content-Type of a request with a body.
// Requests without a body (an action with no options) need none.
func (s *Server) takes(m mediaTypes, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hasBody(r) {
			if err := m.check(r); err != nil {
				s.fail(w, r, err)
				return
			}
		}
		h(w, r)
	})
}

// hasBody reports whether r has at least one byte of body. A chunked body
// of unknown length is peeked at, and the byte put back.
func hasBody(r *http.Request) bool {
	switch {
	case r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0:
		return false
	case r.ContentLength > 0:
		return true
	}
	var first [1]byte
	n, err := io.ReadFull(r.Body, first[:])
	if n == 0 && err == io.EOF {
		return false
	}
	// A read error (other than the end) is left for the handler's read to
	// report: the body is put back with it.
	r.Body = peekedBody{Reader: io.MultiReader(bytes.NewReader(first[:n]), r.Body), Closer: r.Body}
	return true
}

type peekedBody struct {
	io.Reader
	io.Closer
}
