package swcall_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowd/flowd/sw/swcall"
)

// seen is what a test server received.
type seen struct {
	method, requestURI, body string
	header                   http.Header
}

// serve starts a server answering every request with status, contentType
// and body, and reports each request on the returned channel.
func serve(t *testing.T, status int, contentType, body string) (*httptest.Server, <-chan seen) {
	t.Helper()
	got := make(chan seen, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{method: r.Method, requestURI: r.RequestURI, body: string(b), header: r.Header.Clone()}
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		}
		w.Header().Add("X-Multi", "a")
		w.Header().Add("X-Multi", "b")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

func call(t *testing.T, client *http.Client, req swcall.Request) swcall.Result {
	t.Helper()
	input, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return swcall.Do(t.Context(), client, input)
}

func mustOutput(t *testing.T, res swcall.Result) any {
	t.Helper()
	if res.Error != nil {
		t.Fatalf("call failed: %+v", *res.Error)
	}
	var v any
	if err := json.Unmarshal(res.Output, &v); err != nil {
		t.Fatalf("output %s: %v", res.Output, err)
	}
	return v
}

func wantError(t *testing.T, res swcall.Result, typ string, status int, detail string) {
	t.Helper()
	if res.Error == nil {
		t.Fatalf("call succeeded with %s; want a %s error", res.Output, typ)
	}
	if res.Error.Type != typ || res.Error.Status != status || !strings.Contains(res.Error.Detail, detail) {
		t.Fatalf("error = %+v; want type %s status %d detail containing %q", *res.Error, typ, status, detail)
	}
	if res.Error.Title == "" {
		t.Errorf("error %+v has no title", *res.Error)
	}
}

func TestDoContentOutput(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, contentType, body string
		want                    any
	}{
		{"json", "application/json; charset=utf-8", `{"id": 1, "name": "Milou"}`, map[string]any{"id": 1.0, "name": "Milou"}},
		{"problem json", "application/problem+json", `[1, 2]`, []any{1.0, 2.0}},
		{"text", "text/plain", `{"not": "decoded"}`, `{"not": "decoded"}`},
		{"no content type", "", `hello`, "hello"},
		{"json declared but invalid", "application/json", `not json`, "not json"},
		{"binary", "application/octet-stream", "\xff\xfe\x00", base64.StdEncoding.EncodeToString([]byte("\xff\xfe\x00"))},
		{"empty", "application/json", ``, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv, _ := serve(t, http.StatusOK, c.contentType, c.body)
			got := mustOutput(t, call(t, srv.Client(), swcall.Request{Kind: "http", Method: "get", URI: srv.URL}))
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDoResponseOutput(t *testing.T) {
	t.Parallel()
	srv, _ := serve(t, http.StatusCreated, "application/json", `{"id": 7}`)
	got := mustOutput(t, call(t, srv.Client(), swcall.Request{
		Kind: "http", Method: "post", URI: srv.URL + "/pets/{id}", Vars: json.RawMessage(`{"id": 7}`),
		Headers: map[string]string{"x-trace": "abc"}, Body: json.RawMessage(`{"name": "Milou"}`),
		Auth: &swcall.Auth{Bearer: &swcall.BearerAuth{Token: "secret"}}, Output: "response",
	}))
	want := map[string]any{
		"request": map[string]any{
			"method":  "post",
			"uri":     srv.URL + "/pets/7",
			"headers": map[string]any{"Content-Type": "application/json", "X-Trace": "abc"},
		},
		"statusCode": 201.0,
		"content":    map[string]any{"id": 7.0},
	}
	headers := got.(map[string]any)["headers"].(map[string]any)
	delete(got.(map[string]any), "headers")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("response output (-want +got):\n%s", diff)
	}
	if headers["Content-Type"] != "application/json" || headers["X-Multi"] != "a, b" {
		t.Errorf("response headers = %v; want Content-Type application/json and X-Multi \"a, b\"", headers)
	}
}

func TestDoRawOutput(t *testing.T) {
	t.Parallel()
	srv, _ := serve(t, http.StatusOK, "application/json", `{"id": 1}`)
	got := mustOutput(t, call(t, srv.Client(), swcall.Request{Kind: "http", Method: "GET", URI: srv.URL, Output: "raw"}))
	if want := base64.StdEncoding.EncodeToString([]byte(`{"id": 1}`)); got != want {
		t.Errorf("raw output = %v; want %q", got, want)
	}
}

func TestDoInterpolatesPathAndQuery(t *testing.T) {
	t.Parallel()
	srv, got := serve(t, http.StatusOK, "application/json", `{}`)
	mustOutput(t, call(t, srv.Client(), swcall.Request{
		Kind: "http", Method: "get",
		URI:   srv.URL + "/v2/pet/{name}/find?status={status}&limit={limit}",
		Vars:  json.RawMessage(`{"name": "Milou & co/1", "status": "available", "limit": 2.0}`),
		Query: map[string]string{"tag": "a b", "kind": "dog&cat"},
	}))
	r := <-got
	if want := "/v2/pet/Milou%20%26%20co%2F1/find?status=available&limit=2&kind=dog%26cat&tag=a+b"; r.requestURI != want {
		t.Errorf("request URI = %s; want %s", r.requestURI, want)
	}
}

func TestDoSendsHeadersBodyAndAuth(t *testing.T) {
	t.Parallel()
	srv, got := serve(t, http.StatusOK, "application/json", `{}`)
	mustOutput(t, call(t, srv.Client(), swcall.Request{
		Kind: "http", Method: "put", URI: srv.URL,
		Headers: map[string]string{"X-Api-Key": "k1"},
		Body:    json.RawMessage(`{"name": "Milou"}`),
		Auth:    &swcall.Auth{Basic: &swcall.BasicAuth{Username: "serverless-workflow", Password: "conformance-test"}},
	}))
	r := <-got
	if r.method != http.MethodPut || r.body != `{"name":"Milou"}` || r.header.Get("Content-Type") != "application/json" || r.header.Get("X-Api-Key") != "k1" {
		t.Errorf("received %s %q with headers %v; want PUT with the JSON body and X-Api-Key", r.method, r.body, r.header)
	}
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("serverless-workflow:conformance-test"))
	if r.header.Get("Authorization") != want {
		t.Errorf("Authorization = %q; want %q", r.header.Get("Authorization"), want)
	}

	mustOutput(t, call(t, srv.Client(), swcall.Request{Kind: "http", Method: "get", URI: srv.URL,
		Auth: &swcall.Auth{Bearer: &swcall.BearerAuth{Token: "tok"}}}))
	if r := <-got; r.header.Get("Authorization") != "Bearer tok" || r.header.Get("Content-Type") != "" || r.body != "" {
		t.Errorf("bearer request: Authorization %q, Content-Type %q, body %q; want Bearer tok, no body", r.header.Get("Authorization"), r.header.Get("Content-Type"), r.body)
	}
}

func TestDoNon2xxIsCommunicationError(t *testing.T) {
	t.Parallel()
	srv, _ := serve(t, http.StatusNotFound, "application/json", `{"message": "Pet not found"}`+strings.Repeat(" x", 300))
	res := call(t, srv.Client(), swcall.Request{Kind: "http", Method: "get", URI: srv.URL + "/v2/pet/{id}",
		Vars: json.RawMessage(`{"id": 9}`), Pointer: "/do/0/tryGetPet/try/0/getPet"})
	wantError(t, res, swcall.TypeCommunication, 404, "GET "+srv.URL+"/v2/pet/9 answered 404 Not Found: {\"message\": \"Pet not found\"}")
	if res.Error.Instance != "/do/0/tryGetPet/try/0/getPet" {
		t.Errorf("instance = %q; want the task's pointer", res.Error.Instance)
	}
	if len(res.Error.Detail) > 300 {
		t.Errorf("detail is %d bytes; want the body cut to 200", len(res.Error.Detail))
	}
	var shape map[string]any
	b, _ := json.Marshal(res.Error)
	_ = json.Unmarshal(b, &shape)
	for _, k := range []string{"type", "status", "title", "detail", "instance"} {
		if _, ok := shape[k]; !ok {
			t.Errorf("error JSON %s lacks %q", b, k)
		}
	}

	srv, _ = serve(t, http.StatusInternalServerError, "", "")
	res = call(t, srv.Client(), swcall.Request{Kind: "http", Method: "delete", URI: srv.URL})
	wantError(t, res, swcall.TypeCommunication, 500, "")
	if want := "DELETE " + srv.URL + " answered 500 Internal Server Error"; res.Error.Detail != want {
		t.Errorf("detail = %q; want %q (no body, no excerpt)", res.Error.Detail, want)
	}

	srv, _ = serve(t, http.StatusServiceUnavailable, "text/plain", "down")
	wantError(t, call(t, srv.Client(), swcall.Request{Kind: "http", Method: "get", URI: srv.URL}), swcall.TypeCommunication, 503, "503 Service Unavailable: down")
}

func TestDoBoundsResponseBody(t *testing.T) {
	t.Parallel()
	srv, _ := serve(t, http.StatusOK, "text/plain", strings.Repeat("a", swcall.MaxResponseBody+1))
	wantError(t, call(t, srv.Client(), swcall.Request{Kind: "http", Method: "get", URI: srv.URL}),
		swcall.TypeCommunication, 500, "larger than 1048576 bytes")

	srv, _ = serve(t, http.StatusOK, "text/plain", strings.Repeat("a", swcall.MaxResponseBody))
	if got := mustOutput(t, call(t, srv.Client(), swcall.Request{Kind: "http", Method: "get", URI: srv.URL})); len(got.(string)) != swcall.MaxResponseBody {
		t.Errorf("a body of exactly the bound should pass whole")
	}

	// An error answer keeps its status however long its body is.
	srv, _ = serve(t, http.StatusBadRequest, "text/plain", strings.Repeat("a", swcall.MaxResponseBody+10))
	wantError(t, call(t, srv.Client(), swcall.Request{Kind: "http", Method: "get", URI: srv.URL}), swcall.TypeCommunication, 400, "400 Bad Request")
}

func TestDoTransportFailure(t *testing.T) {
	t.Parallel()
	srv, _ := serve(t, http.StatusOK, "", "")
	client, uri := srv.Client(), srv.URL
	srv.Close()
	wantError(t, call(t, client, swcall.Request{Kind: "http", Method: "get", URI: uri, Pointer: "/do/0/a"}),
		swcall.TypeCommunication, 500, "GET "+uri+" failed")
}

func TestDoTimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	input, _ := json.Marshal(swcall.Request{Kind: "http", Method: "get", URI: srv.URL, Pointer: "/do/0/slow"})

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	wantError(t, swcall.Do(ctx, srv.Client(), input), swcall.TypeTimeout, 408, "timed out")

	client := srv.Client()
	client.Timeout = 20 * time.Millisecond
	wantError(t, swcall.Do(t.Context(), client, input), swcall.TypeTimeout, 408, "timed out")
}

func TestDoRejectsMalformedInput(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, input, typ string
		status           int
		detail           string
	}{
		{"not json", `{"kind": `, swcall.TypeRuntime, 500, "malformed call request"},
		{"wrong field type", `{"kind": "http", "headers": [1]}`, swcall.TypeRuntime, 500, "malformed call request"},
		{"unknown kind", `{"kind": "grpc", "pointer": "/do/0/x"}`, swcall.TypeRuntime, 500, `kind "grpc"`},
		{"unknown output", `{"kind": "http", "method": "get", "uri": "http://h", "output": "xml"}`, swcall.TypeConfiguration, 400, `output "xml"`},
		{"no method", `{"kind": "http", "uri": "http://h"}`, swcall.TypeConfiguration, 400, "needs a method"},
		{"relative uri", `{"kind": "http", "method": "get", "uri": "/v2/pet"}`, swcall.TypeConfiguration, 400, "not an absolute URI"},
		{"bad uri", `{"kind": "http", "method": "get", "uri": "http://h/%zz"}`, swcall.TypeConfiguration, 400, "not a valid URI"},
		{"bad method", `{"kind": "http", "method": "g et", "uri": "http://h"}`, swcall.TypeConfiguration, 400, "cannot build"},
		{"object var", `{"kind": "http", "method": "get", "uri": "http://h/{a}", "vars": {"a": {}}}`, swcall.TypeExpression, 400, `variable "a"`},
		{"no operation", `{"kind": "openapi", "document": "http://h/doc.json"}`, swcall.TypeConfiguration, 400, "needs an operationId"},
		{"relative document", `{"kind": "openapi", "document": "doc.json", "operationId": "x"}`, swcall.TypeConfiguration, 400, "not an absolute URI"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			wantError(t, swcall.Do(t.Context(), http.DefaultClient, json.RawMessage(c.input)), c.typ, c.status, c.detail)
		})
	}
}
