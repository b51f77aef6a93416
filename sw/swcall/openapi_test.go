package swcall_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowd/flowd/sw/swcall"
)

// apiServer serves document (with {{host}} replaced by the server's host)
// at /doc and answers every other request with a JSON echo of it.
func apiServer(t *testing.T, contentType, document string) (*httptest.Server, <-chan seen) {
	t.Helper()
	got := make(chan seen, 16)
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/doc" {
			w.Header().Set("Content-Type", contentType)
			_, _ = io.WriteString(w, strings.ReplaceAll(document, "{{host}}", strings.TrimPrefix(srv.URL, "http://")))
			return
		}
		if r.URL.Path == "/missing.json" {
			http.NotFound(w, r)
			return
		}
		b, _ := io.ReadAll(r.Body)
		got <- seen{method: r.Method, requestURI: r.RequestURI, body: string(b), header: r.Header.Clone()}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"path": r.URL.Path})
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

const swagger2 = `{
  "swagger": "2.0",
  "host": "{{host}}",
  "basePath": "/v2",
  "schemes": ["https", "http"],
  "parameters": {"apiKey": {"name": "api_key", "in": "header"}},
  "paths": {
    "/pet/findByStatus": {"get": {"operationId": "findPetsByStatus", "parameters": [
      {"name": "status", "in": "query", "required": true, "type": "array", "collectionFormat": "multi"},
      {"name": "tags", "in": "query", "type": "array"},
      {"$ref": "#/parameters/apiKey"}]}},
    "/pet/{petId}": {
      "parameters": [{"name": "petId", "in": "path", "required": true, "type": "integer"}],
      "get": {"operationId": "getPetById"},
      "post": {"operationId": "updatePet", "parameters": [{"name": "pet", "in": "body", "required": true}]}
    },
    "/pet/{petId}/uploadImage": {"post": {"operationId": "uploadFile", "parameters": [
      {"name": "petId", "in": "path", "required": true},
      {"name": "additionalMetadata", "in": "formData"}]}},
    "/broken": {"get": {"operationId": "broken", "parameters": [{"$ref": "#/definitions/nope"}]}}
  }
}`

func TestOpenAPI2Operations(t *testing.T) {
	t.Parallel()
	srv, got := apiServer(t, "application/json", swagger2)
	doc := srv.URL + "/doc"
	cases := []struct {
		name       string
		operation  string
		parameters string
		method     string
		requestURI string
		body       string
		header     [2]string
	}{
		{"query multi and csv, header by reference", "findPetsByStatus", `{"status": ["available", "pending"], "tags": ["a", "b c"], "api_key": "k", "ignored": 1}`,
			"GET", "/v2/pet/findByStatus?status=available&status=pending&tags=a%2Cb+c", "", [2]string{"Api_key", "k"}},
		{"path parameter from the path item, encoded", "getPetById", `{"petId": "1/2"}`, "GET", "/v2/pet/1%2F2", "", [2]string{}},
		{"body parameter", "updatePet", `{"petId": 3, "pet": {"name": "Milou"}}`, "POST", "/v2/pet/3", `{"name":"Milou"}`, [2]string{"Content-Type", "application/json"}},
		{"form parameter", "uploadFile", `{"petId": 3, "additionalMetadata": "x y"}`, "POST", "/v2/pet/3/uploadImage", "additionalMetadata=x+y", [2]string{"Content-Type", "application/x-www-form-urlencoded"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := call(t, srv.Client(), swcall.Request{Kind: "openapi", Document: doc, Operation: c.operation, Parameters: params(t, c.parameters)})
			path, err := url.PathUnescape(strings.SplitN(c.requestURI, "?", 2)[0])
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]any{"path": path}
			if diff := cmp.Diff(want, mustOutput(t, res)); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
			r := <-got
			if r.method != c.method || r.requestURI != c.requestURI || r.body != c.body {
				t.Errorf("sent %s %s %q; want %s %s %q", r.method, r.requestURI, r.body, c.method, c.requestURI, c.body)
			}
			if c.header[0] != "" && r.header.Get(c.header[0]) != c.header[1] {
				t.Errorf("header %s = %q; want %q", c.header[0], r.header.Get(c.header[0]), c.header[1])
			}
		})
	}
}

func params(t *testing.T, s string) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestOpenAPI2Errors(t *testing.T) {
	t.Parallel()
	srv, _ := apiServer(t, "application/json", swagger2)
	doc := srv.URL + "/doc"
	cases := []struct {
		name, operation, parameters, typ string
		status                           int
		detail                           string
	}{
		{"unknown operation", "getPetByName", `{}`, swcall.TypeConfiguration, 400, `has no operation "getPetByName"`},
		{"missing required query", "findPetsByStatus", `{}`, swcall.TypeValidation, 400, `requires parameter "status"`},
		{"missing path parameter", "getPetById", `{"petId": null}`, swcall.TypeValidation, 400, `requires parameter "petId"`},
		{"missing body", "updatePet", `{"petId": 1}`, swcall.TypeValidation, 400, `requires parameter "pet"`},
		{"object parameter", "getPetById", `{"petId": {"id": 1}}`, swcall.TypeValidation, 400, `parameter "petId"`},
		{"unresolvable reference", "broken", `{}`, swcall.TypeConfiguration, 400, `"#/definitions/nope"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			res := call(t, srv.Client(), swcall.Request{Kind: "openapi", Document: doc, Operation: c.operation, Parameters: params(t, c.parameters), Pointer: "/do/0/x"})
			wantError(t, res, c.typ, c.status, c.detail)
			if res.Error.Instance != "/do/0/x" {
				t.Errorf("instance = %q; want /do/0/x", res.Error.Instance)
			}
		})
	}
}

// The API's scheme is the document's own when the API lists it, else the
// first listed: here https, which the plain server cannot answer.
func TestOpenAPI2SchemeFallsBackToTheFirstListed(t *testing.T) {
	t.Parallel()
	srv, _ := apiServer(t, "application/json", strings.Replace(swagger2, `["https", "http"]`, `["https"]`, 1))
	res := call(t, srv.Client(), swcall.Request{Kind: "openapi", Document: srv.URL + "/doc", Operation: "getPetById", Parameters: params(t, `{"petId": 1}`)})
	host := strings.TrimPrefix(srv.URL, "http://")
	wantError(t, res, swcall.TypeCommunication, 500, "GET https://"+host+"/v2/pet/1 failed")
}

const openAPI3 = `openapi: 3.0.3
info: {title: pets, version: "1"}
servers:
  - url: /api/{version}
    variables:
      version: {default: v3}
paths:
  /pet/findByTags:
    get:
      operationId: findPetsByTags
      parameters:
        - {name: tags, in: query, explode: false}
        - {name: colours, in: query}
        - {name: sizes, in: query, style: pipeDelimited, explode: false}
        - $ref: '#/components/parameters/Trace'
        - {name: session, in: cookie}
        - {name: theme, in: cookie}
  /pet/{petId}:
    put:
      operationId: updatePet
      parameters:
        - {name: petId, in: path, required: true}
      requestBody:
        required: true
        content:
          application/json: {}
  /other:
    servers:
      - url: http://{{host}}/elsewhere
    get:
      operationId: other
components:
  parameters:
    Trace: {name: X-Trace, in: header}
`

func TestOpenAPI3Operations(t *testing.T) {
	t.Parallel()
	srv, got := apiServer(t, "application/yaml", openAPI3)
	doc := srv.URL + "/doc"
	cases := []struct {
		name, operation, parameters, method, requestURI, body string
		header                                                [2]string
	}{
		{"query styles, header by reference, relative server with variables", "findPetsByTags",
			`{"tags": ["a", "b"], "colours": ["red", "blue"], "sizes": ["s", "m"], "X-Trace": 7}`,
			"GET", "/api/v3/pet/findByTags?colours=red&colours=blue&sizes=s%7Cm&tags=a%2Cb", "", [2]string{"X-Trace", "7"}},
		{"cookie parameters", "findPetsByTags", `{"session": "abc", "theme": "dark"}`,
			"GET", "/api/v3/pet/findByTags", "", [2]string{"Cookie", "session=abc; theme=dark"}},
		{"request body", "updatePet", `{"petId": 5, "body": {"name": "Milou"}}`, "PUT", "/api/v3/pet/5", `{"name":"Milou"}`, [2]string{"Content-Type", "application/json"}},
		{"path item server", "other", `{}`, "GET", "/elsewhere/other", "", [2]string{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mustOutput(t, call(t, srv.Client(), swcall.Request{Kind: "openapi", Document: doc, Operation: c.operation, Parameters: params(t, c.parameters)}))
			r := <-got
			if r.method != c.method || r.requestURI != c.requestURI || r.body != c.body {
				t.Errorf("sent %s %s %q; want %s %s %q", r.method, r.requestURI, r.body, c.method, c.requestURI, c.body)
			}
			if c.header[0] != "" && r.header.Get(c.header[0]) != c.header[1] {
				t.Errorf("header %s = %q; want %q", c.header[0], r.header.Get(c.header[0]), c.header[1])
			}
		})
	}
	wantError(t, call(t, srv.Client(), swcall.Request{Kind: "openapi", Document: doc, Operation: "updatePet", Parameters: params(t, `{"petId": 5}`)}),
		swcall.TypeValidation, 400, `requires a request body (parameter "body")`)
}

func TestOpenAPIOutputModesAndAuth(t *testing.T) {
	t.Parallel()
	srv, got := apiServer(t, "application/json", swagger2)
	res := call(t, srv.Client(), swcall.Request{Kind: "openapi", Document: srv.URL + "/doc", Operation: "getPetById",
		Parameters: params(t, `{"petId": 1}`), Output: "response", Headers: map[string]string{"X-Extra": "1"},
		Auth: &swcall.Auth{Bearer: &swcall.BearerAuth{Token: "t"}}})
	out := mustOutput(t, res).(map[string]any)
	request := out["request"].(map[string]any)
	if request["method"] != "get" || request["uri"] != srv.URL+"/v2/pet/1" || out["statusCode"] != 200.0 {
		t.Errorf("response output = %v; want get %s/v2/pet/1, status 200", out, srv.URL)
	}
	if r := <-got; r.header.Get("Authorization") != "Bearer t" || r.header.Get("X-Extra") != "1" {
		t.Errorf("sent headers %v; want Authorization: Bearer t and X-Extra", r.header)
	}
}

func TestOpenAPIDocumentErrors(t *testing.T) {
	t.Parallel()
	srv, _ := apiServer(t, "application/json", `{"info": {"title": "not an API"}}`)
	wantError(t, call(t, srv.Client(), swcall.Request{Kind: "openapi", Document: srv.URL + "/doc", Operation: "x"}),
		swcall.TypeConfiguration, 400, "neither a Swagger 2.0 nor an OpenAPI 3 document")
	wantError(t, call(t, srv.Client(), swcall.Request{Kind: "openapi", Document: srv.URL + "/missing.json", Operation: "x"}),
		swcall.TypeCommunication, 404, "GET "+srv.URL+"/missing.json answered 404 Not Found")

	bad, _ := apiServer(t, "application/json", `{"swagger": [`)
	wantError(t, call(t, bad.Client(), swcall.Request{Kind: "openapi", Document: bad.URL + "/doc", Operation: "x"}),
		swcall.TypeConfiguration, 400, "cannot be read")
}

// An OpenAPI document whose YAML aliases would expand it past 4 MiB is
// refused before it is decoded.
func TestOpenAPIDocumentAliasBomb(t *testing.T) {
	t.Parallel()
	doc := "openapi: 3.0.3\nx-big: &big \"" + strings.Repeat("x", 100_000) + "\"\nx-copies: [" + strings.Repeat("*big, ", 999) + "*big]\n"
	srv, _ := apiServer(t, "application/yaml", doc)
	wantError(t, call(t, srv.Client(), swcall.Request{Kind: "openapi", Document: srv.URL + "/doc", Operation: "x"}),
		swcall.TypeConfiguration, 400, "the YAML document is too large: more than 4194304 bytes once its aliases are expanded")
}
