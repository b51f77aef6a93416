package swtest_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowd/flowd/sw/swcall"
	"github.com/flowd/flowd/sw/swtest"
)

// do runs req through the stub's client, as the engine would.
func do(t *testing.T, stub *swtest.Stub, req swcall.Request) swcall.Result {
	t.Helper()
	input, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return swcall.Do(t.Context(), stub.Client(), input)
}

func output(t *testing.T, res swcall.Result) any {
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

// property follows a dotted path through objects, as the CTK's "should have
// properties 'a.b'" does.
func property(v any, path ...string) (any, bool) {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[p]; !ok {
			return nil, false
		}
	}
	return v, true
}

func wantProperties(t *testing.T, v any, paths ...[]string) {
	t.Helper()
	for _, p := range paths {
		if _, ok := property(v, p...); !ok {
			t.Errorf("output %v has no property %v", v, p)
		}
	}
}

var petProperties = [][]string{{"id"}, {"name"}, {"status"}}

// call.feature, "Call HTTP With Content Output": output.as .[0] has id, name, status.
func TestCallHTTPWithContentOutput(t *testing.T) {
	t.Parallel()
	stub := swtest.NewStub(t)
	out := output(t, do(t, stub, swcall.Request{Kind: "http", Method: "get",
		URI: "https://petstore.swagger.io/v2/pet/findByStatus?status={status}", Vars: json.RawMessage(`{"status": "available"}`)}))
	pets, ok := out.([]any)
	if !ok || len(pets) == 0 {
		t.Fatalf("output = %v; want a non-empty array", out)
	}
	wantProperties(t, pets[0], petProperties...)
	for _, p := range pets {
		if s, _ := property(p, "status"); s != "available" {
			t.Errorf("pet %v is not available", p)
		}
	}
	reqs := stub.Requests()
	if len(reqs) != 1 {
		t.Fatalf("stub received %d requests; want 1", len(reqs))
	}
	r := reqs[0]
	if r.Method != "GET" || r.Scheme != "https" || r.Host != "petstore.swagger.io" || r.Path != "/v2/pet/findByStatus" ||
		!cmp.Equal(r.Query, url.Values{"status": {"available"}}) {
		t.Errorf("stub received %+v; want GET https://petstore.swagger.io/v2/pet/findByStatus?status=available", r)
	}
}

// call.feature, "Call HTTP With Response Output".
func TestCallHTTPWithResponseOutput(t *testing.T) {
	t.Parallel()
	stub := swtest.NewStub(t)
	out := output(t, do(t, stub, swcall.Request{Kind: "http", Method: "get",
		URI: "https://petstore.swagger.io/v2/pet/{petId}", Vars: json.RawMessage(`{"petId": 1}`), Output: "response"}))
	wantProperties(t, out, []string{"request"}, []string{"request", "method"}, []string{"request", "uri"}, []string{"request", "headers"},
		[]string{"headers"}, []string{"statusCode"}, []string{"content"},
		[]string{"content", "id"}, []string{"content", "name"}, []string{"content", "status"})
	if uri, _ := property(out, "request", "uri"); uri != "https://petstore.swagger.io/v2/pet/1" {
		t.Errorf("request.uri = %v; want the URI as addressed", uri)
	}
	if id, _ := property(out, "content", "id"); id != 1.0 {
		t.Errorf("content.id = %v; want 1", id)
	}
}

// call.feature, "Call HTTP Using Basic Authentication": the right
// credentials pass, wrong ones are a communication error with status 401.
func TestCallHTTPUsingBasicAuthentication(t *testing.T) {
	t.Parallel()
	stub := swtest.NewStub(t)
	login := func(user, password string) swcall.Result {
		return do(t, stub, swcall.Request{Kind: "http", Method: "get", URI: "https://httpbin.org/basic-auth/{username}/{password}",
			Vars: json.RawMessage(`{"username": "serverless-workflow", "password": "conformance-test"}`),
			Auth: &swcall.Auth{Basic: &swcall.BasicAuth{Username: user, Password: password}}, Pointer: "/do/0/login"})
	}
	want := map[string]any{"authenticated": true, "user": "serverless-workflow"}
	if diff := cmp.Diff(want, output(t, login("serverless-workflow", "conformance-test"))); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	res := login("serverless-workflow", "wrong")
	if res.Error == nil || res.Error.Type != swcall.TypeCommunication || res.Error.Status != http.StatusUnauthorized || res.Error.Instance != "/do/0/login" {
		t.Errorf("wrong password: result %+v, error %+v; want a communication error 401 at /do/0/login", res, res.Error)
	}
}

// call.feature, "Call OpenAPI With Content Output": findPetsByStatus.
func TestCallOpenAPIWithContentOutput(t *testing.T) {
	t.Parallel()
	stub := swtest.NewStub(t)
	out := output(t, do(t, stub, swcall.Request{Kind: "openapi", Document: "https://petstore.swagger.io/v2/swagger.json",
		Operation: "findPetsByStatus", Parameters: map[string]json.RawMessage{"status": json.RawMessage(`"available"`)}}))
	pets, ok := out.([]any)
	if !ok || len(pets) != 2 {
		t.Fatalf("output = %v; want the 2 available pets", out)
	}
	reqs := stub.Requests()
	if len(reqs) != 2 || reqs[0].Path != "/v2/swagger.json" {
		t.Fatalf("stub received %+v; want the document then the operation", reqs)
	}
	if r := reqs[1]; r.Scheme != "https" || r.Host != "petstore.swagger.io" || r.Path != "/v2/pet/findByStatus" || r.Query.Get("status") != "available" {
		t.Errorf("operation request %+v; want GET https://petstore.swagger.io/v2/pet/findByStatus?status=available", r)
	}
}

// call.feature, "Call OpenAPI With Response Output": getPetById.
func TestCallOpenAPIWithResponseOutput(t *testing.T) {
	t.Parallel()
	stub := swtest.NewStub(t)
	out := output(t, do(t, stub, swcall.Request{Kind: "openapi", Document: "https://petstore.swagger.io/v2/swagger.json",
		Operation: "getPetById", Parameters: map[string]json.RawMessage{"petId": json.RawMessage(`1`)}, Output: "response"}))
	wantProperties(t, out, []string{"request", "method"}, []string{"request", "uri"}, []string{"request", "headers"},
		[]string{"headers"}, []string{"statusCode"}, []string{"content", "id"}, []string{"content", "name"}, []string{"content", "status"})
	if uri, _ := property(out, "request", "uri"); uri != "https://petstore.swagger.io/v2/pet/1" {
		t.Errorf("request.uri = %v; want https://petstore.swagger.io/v2/pet/1", uri)
	}
}

// data-flow.feature: pets 1 and 2 by id.
func TestGetPetsByID(t *testing.T) {
	t.Parallel()
	stub := swtest.NewStub(t)
	for _, id := range []int{1, 2} {
		out := output(t, do(t, stub, swcall.Request{Kind: "http", Method: "get", URI: "https://petstore.swagger.io/v2/pet/{petId}",
			Vars: json.RawMessage(fmt.Sprintf(`{"petId": %d}`, id))}))
		if got, _ := property(out, "id"); got != float64(id) {
			t.Errorf("pet %v: id = %v", id, got)
		}
	}
	res := do(t, stub, swcall.Request{Kind: "http", Method: "get", URI: "https://petstore.swagger.io/v2/pet/999"})
	if res.Error == nil || res.Error.Status != http.StatusNotFound {
		t.Errorf("unknown pet: error %+v; want status 404", res.Error)
	}
}

// try.feature: getPetByName answers 404, a communication error that a catch
// on status 404 handles, raised at the task's pointer.
func TestGetPetByNameIsNotFound(t *testing.T) {
	t.Parallel()
	stub := swtest.NewStub(t)
	res := do(t, stub, swcall.Request{Kind: "http", Method: "get", URI: "https://petstore.swagger.io/v2/pet/getPetByName/{petName}",
		Vars: json.RawMessage(`{"petName": "Milou"}`), Pointer: "/do/0/tryGetPet/try/0/getPet"})
	want := &swcall.Error{Type: swcall.TypeCommunication, Status: 404, Title: "Communication Error", Instance: "/do/0/tryGetPet/try/0/getPet"}
	if res.Error == nil {
		t.Fatalf("output %s; want a 404 communication error", res.Output)
	}
	got := *res.Error
	got.Detail = ""
	if diff := cmp.Diff(*want, got); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}
}

// Client sends any host and scheme to the stub; unknown routes are 404.
func TestClientSendsEverythingToTheStub(t *testing.T) {
	t.Parallel()
	stub := swtest.NewStub(t)
	res, err := stub.Client().Post("http://example.com/anything/x?a=1", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	var echo map[string]any
	if err := json.NewDecoder(res.Body).Decode(&echo); err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if echo["method"] != "POST" || echo["url"] != "/anything/x?a=1" {
		t.Errorf("echo = %v; want POST /anything/x?a=1", echo)
	}
	res, err = stub.Client().Get("https://unknown.test/nothing")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Errorf("unknown route: status %d; want 404", res.StatusCode)
	}
	reqs := stub.Requests()
	if len(reqs) != 2 || reqs[0].Host != "example.com" || reqs[0].Scheme != "http" || reqs[1].Host != "unknown.test" || reqs[1].Scheme != "https" {
		t.Errorf("requests = %+v; want example.com over http then unknown.test over https", reqs)
	}
}
