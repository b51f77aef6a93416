package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	verrors "github.com/pb33f/libopenapi-validator/errors"

	"github.com/flowd/flowd/httpapi"
	"github.com/flowd/flowd/web"
)

// dashboardPatterns are the routes of the web page, not of the API: they
// serve HTML and its assets and are left out of the API description.
var dashboardPatterns = []string{"GET /{$}", "GET " + web.AssetPrefix}

// The document is served as JSON, is OpenAPI 3.1 and builds without errors.
func TestOpenAPIServed(t *testing.T) {
	st := backends[0].open(t)
	t.Cleanup(func() { st.Close() })
	handler, err := httpapi.NewServer(httpapi.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest("GET", "http://localhost/v1/openapi.json", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /v1/openapi.json: %d %s", rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	var doc struct {
		OpenAPI string                    `json:"openapi"`
		Paths   map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatalf("the document is not JSON: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1.") {
		t.Errorf("openapi %q, want 3.1.x", doc.OpenAPI)
	}
	openAPIValidator(t)
}

// Every route the server registers is in the document, and every operation of
// the document is a route the server registers.
func TestOpenAPIRoutesAgree(t *testing.T) {
	st := backends[0].open(t)
	t.Cleanup(func() { st.Close() })
	s, err := httpapi.NewServer(httpapi.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	var served []string
	for _, p := range httpapi.RoutePatterns(s) {
		if !slices.Contains(dashboardPatterns, p) {
			served = append(served, p)
		}
	}
	documented := documentedOperations(t)
	for _, p := range served {
		if !slices.Contains(documented, p) {
			t.Errorf("route %q is served but not in openapi.yaml", p)
		}
	}
	for _, p := range documented {
		if !slices.Contains(served, p) {
			t.Errorf("openapi.yaml describes %q, which the server does not register", p)
		}
	}
	if len(served) < 30 {
		t.Errorf("only %d routes recorded: %v", len(served), served)
	}
}

var (
	openAPIOnce sync.Once
	openAPIV    validator.Validator
	openAPIErr  error
)

// openAPIValidator builds (once per process) the validator of the document;
// it fails the test if the document itself does not validate.
func openAPIValidator(t testing.TB) validator.Validator {
	t.Helper()
	openAPIOnce.Do(func() {
		doc, err := httpapi.OpenAPIDocument()
		if err != nil {
			openAPIErr = err
			return
		}
		d, err := libopenapi.NewDocument(doc)
		if err != nil {
			openAPIErr = err
			return
		}
		v, errs := validator.NewValidator(d)
		if len(errs) > 0 {
			openAPIErr = errs[0]
			return
		}
		if ok, verrs := v.ValidateDocument(); !ok {
			var b strings.Builder
			for _, e := range verrs {
				b.WriteString(e.Error() + "\n")
			}
			openAPIErr = &docError{b.String()}
			return
		}
		openAPIV = v
	})
	if openAPIErr != nil {
		t.Fatalf("openapi.yaml: %v", openAPIErr)
	}
	return openAPIV
}

type docError struct{ msg string }

func (e *docError) Error() string { return e.msg }

// validatingHandler checks the traffic of the API suite against the
// document: every response, and every request the server accepted (2xx or
// 304: the suite sends malformed requests on purpose, and those must be
// refused, not described). A mismatch fails t, naming method, path and status.
//
// seen, when not nil, records the operations exercised (as "METHOD /path").
func validatingHandler(t testing.TB, next http.Handler, seen *operationSet) http.Handler {
	v := openAPIValidator(t)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.add(r)
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("reading %s %s: %v", r.Method, r.URL.Path, err)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		for k, vs := range rec.Header() {
			w.Header()[k] = vs
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())

		req := r.Clone(r.Context())
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.Header.Set("Content-Type", servedMediaType(r, body))
		res := rec.Result()
		res.Request = req
		report := func(what string, errs []*verrors.ValidationError) {
			for _, e := range errs {
				msg := e.Message + ": " + e.Reason
				for _, se := range e.SchemaValidationErrors {
					msg += "; " + se.Error()
				}
				t.Errorf("openapi: %s %s → %d: %s %s (body %.300s)", r.Method, r.URL.RequestURI(), rec.Code, what, msg, rec.Body.Bytes())
			}
		}
		if rec.Code < 300 || rec.Code == http.StatusNotModified {
			if ok, errs := v.ValidateHttpRequest(req); !ok {
				report("request:", errs)
			}
			req.Body = io.NopCloser(bytes.NewReader(body))
		}
		if ok, errs := v.ValidateHttpResponse(req, res); !ok {
			if len(errs) == 1 && errs[0].ValidationType == "path" {
				// A path or method the API does not have (404, 405), or a
				// request refused before routing (421 on "/"): no operation
				// describes it, but it must still be the JSON error body.
				checkErrorBody(t, r, rec)
				return
			}
			report("response:", errs)
		}
	})
}

// servedMediaType is the media type the server reads a body as: a body
// without Content-Type is JSON, and a definition that is not a JSON object
// is YAML whichever of the accepted types labels it.
func servedMediaType(r *http.Request, body []byte) string {
	ct := r.Header.Get("Content-Type")
	if len(body) == 0 {
		return ct
	}
	if ct == "" {
		ct = "application/json"
	}
	if r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/v1/definitions/") && !json.Valid(body) {
		ct = "application/yaml"
	}
	return ct
}

// checkErrorBody checks an answer that no operation of the document covers:
// an error status with the JSON error body.
func checkErrorBody(t testing.TB, r *http.Request, rec *httptest.ResponseRecorder) {
	t.Helper()
	var e struct {
		Error   *string `json:"error"`
		Message *string `json:"message"`
	}
	if rec.Code < 400 || rec.Header().Get("Content-Type") != "application/json" ||
		json.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Error == nil || e.Message == nil {
		t.Errorf("openapi: %s %s → %d is not in the document and not a JSON error: %q", r.Method, r.URL.RequestURI(), rec.Code, rec.Body.String())
	}
}

// operationSet records which documented operations a suite exercised: a mux
// with one no-op handler per operation tells the pattern of a request.
type operationSet struct {
	mux  *http.ServeMux
	mu   sync.Mutex
	seen map[string]bool
	all  []string
}

func newOperationSet(t *testing.T) *operationSet {
	t.Helper()
	o := &operationSet{mux: http.NewServeMux(), seen: map[string]bool{}, all: documentedOperations(t)}
	for _, p := range o.all {
		o.mux.HandleFunc(p, func(http.ResponseWriter, *http.Request) {})
	}
	return o
}

func (o *operationSet) add(r *http.Request) {
	if o == nil {
		return
	}
	if _, pattern := o.mux.Handler(r); pattern != "" {
		o.mu.Lock()
		o.seen[pattern] = true
		o.mu.Unlock()
	}
}

// missing lists the documented operations no request reached.
func (o *operationSet) missing() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for _, p := range o.all {
		if !o.seen[p] {
			out = append(out, p)
		}
	}
	return out
}

// documentedOperations lists the document's operations as mux patterns.
func documentedOperations(t *testing.T) []string {
	t.Helper()
	doc, err := httpapi.OpenAPIDocument()
	if err != nil {
		t.Fatal(err)
	}
	var parsed struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(doc, &parsed); err != nil {
		t.Fatal(err)
	}
	var out []string
	for path, item := range parsed.Paths {
		for method := range item {
			switch method {
			case "get", "put", "post", "delete", "patch", "head", "options", "trace":
				out = append(out, strings.ToUpper(method)+" "+path)
			}
		}
	}
	slices.Sort(out)
	return out
}

// errorRecorder is a testing.TB whose Errorf records instead of failing.
type errorRecorder struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (e *errorRecorder) Errorf(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.errs = append(e.errs, fmt.Sprintf(format, args...))
}

// The validating handler reports what does not match the document: a body
// missing required fields, a status not described, a non-JSON error, and an
// accepted request whose body the document forbids; a correct exchange passes.
func TestOpenAPIValidationCatchesMismatches(t *testing.T) {
	instance := `{"id":"a","definition":"","status":"PENDING","state":{},"input":{},"version":0,` +
		`"created_at":"2026-11-26T05:00:00Z","updated_at":"2026-11-26T05:00:00Z"}`
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		answer, ctype            string
		want                     string // "" when the exchange is valid
	}{
		{"valid", "GET", "/v1/workflows/a", "", 200, instance, "application/json", ""},
		{"missing field", "GET", "/v1/workflows/a", "", 200, `{"id":"a"}`, "application/json", "missing properties"},
		{"wrong type", "GET", "/v1/workflows/a", "", 200, strings.Replace(instance, `"version":0`, `"version":"0"`, 1), "application/json", "version"},
		{"error body", "GET", "/v1/workflows/a", "", 404, `{"oops":true}`, "application/json", "missing properties 'error', 'message'"},
		{"plain error on no route", "GET", "/v1/nothing", "", 404, "not found", "text/plain", "not a JSON error"},
		{"accepted bad request", "POST", "/v1/workflows/a/status", `{"from":"RUNNING","to":"PAUSED","extra":1}`, 200, instance, "application/json", "extra"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &errorRecorder{TB: t}
			server := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.ctype)
				w.Header().Set("ETag", `"0"`)
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.answer)
			})
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			req := httptest.NewRequest(tc.method, "http://localhost"+tc.path, body)
			if tc.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			validatingHandler(rec, server, nil).ServeHTTP(httptest.NewRecorder(), req)
			got := strings.Join(rec.errs, "\n")
			if tc.want == "" && got != "" {
				t.Errorf("a valid exchange was reported: %s", got)
			}
			if tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("reported %q, want a report mentioning %q", got, tc.want)
			}
		})
	}
}
