package apitest

import (
	"strings"
	"testing"
)

// testOpenAPI: the API describes itself: GET /v1/openapi.json is an OpenAPI
// 3.1 document (JSON) with the routes of the API among its paths.
func testOpenAPI(t *testing.T, a *api) {
	r := a.do("GET", "/v1/openapi.json", "")
	expect(t, r, 200, "the OpenAPI document")
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	var doc struct {
		OpenAPI string                    `json:"openapi"`
		Paths   map[string]map[string]any `json:"paths"`
	}
	r.json(t, &doc)
	if !strings.HasPrefix(doc.OpenAPI, "3.1.") {
		t.Errorf("openapi %q, want 3.1.x", doc.OpenAPI)
	}
	for path, method := range map[string]string{
		"/v1/workflows/{id}":                       "patch",
		"/v1/workflows/{id}/steps/{step}/complete": "post",
		"/v1/tasks/poll":                           "post",
		"/v1/schedules/{name}/backfill":            "post",
		"/healthz":                                 "get",
	} {
		if doc.Paths[path][method] == nil {
			t.Errorf("the document has no %s %s", strings.ToUpper(method), path)
		}
	}
}
