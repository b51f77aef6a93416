package apitest

import (
	"fmt"
	"strings"
	"testing"
)

// testCodeSearch walks ctx.search's route: a run sets a search attribute
// (a version), setting the same value again writes nothing, a list finds
// the instance by it; a bad name or value, or a 17th attribute, is a 400,
// and a run that ended waiting sets nothing (409).
func testCodeSearch(t *testing.T, newServer NewServer) {
	a := &api{t: t, url: newServer(t)}
	expect(t, a.do("PUT", "/v1/definitions/order", "name: order\ncode: {handler: order}\nsearch: {customer: '{{ .input.customer }}'}\n"), 201, "code definition")
	expect(t, a.do("POST", "/v1/workflows", `{"id":"cs-1","definition":"order","input":{"customer":"acme"}}`), 201, "start")
	r := a.do("POST", "/v1/tasks/poll", `{"worker":"w","handlers":["order"],"wait_seconds":5}`)
	expect(t, r, 200, "poll")
	var run struct {
		TaskID string `json:"task_id"`
		Lease  string `json:"lease"`
	}
	r.json(t, &run)
	base := "/v1/tasks/" + run.TaskID + "/search/"
	version := func() float64 {
		t.Helper()
		return a.do("GET", "/v1/workflows/cs-1", "").instance(t)["version"].(float64)
	}
	v0 := version()
	r = a.do("POST", base+"stage", `{"lease":"`+run.Lease+`","value":"paid"}`)
	expect(t, r, 200, "set")
	if !strings.Contains(string(r.body), `"name":"stage"`) || !strings.Contains(string(r.body), `"value":"paid"`) {
		t.Errorf("set answered %s", r.body)
	}
	if v := version(); v != v0+1 {
		t.Errorf("version after a set: %v, want %v", v, v0+1)
	}
	expect(t, a.do("POST", base+"stage", `{"lease":"`+run.Lease+`","value":"paid"}`), 200, "set again")
	expect(t, a.do("POST", base+"customer", `{"lease":"`+run.Lease+`","value":"acme"}`), 200, "set the definition's value again")
	if v := version(); v != v0+1 {
		t.Errorf("version after setting the same values: %v, want %v", v, v0+1)
	}
	var page struct{ Workflows []struct{ ID string } }
	a.do("GET", "/v1/workflows?search.stage=paid&search.customer=acme", "").json(t, &page)
	if len(page.Workflows) != 1 || page.Workflows[0].ID != "cs-1" {
		t.Errorf("list by stage and customer: %+v, want cs-1", page.Workflows)
	}
	for name, body := range map[string]string{
		"Stage": `{"lease":"` + run.Lease + `","value":"x"}`,
		"obj":   `{"lease":"` + run.Lease + `","value":{"x":1}}`,
		"nul":   `{"lease":"` + run.Lease + `","value":null}`,
	} {
		r := a.do("POST", base+name, body)
		expect(t, r, 400, "set "+name)
		if !strings.Contains(string(r.body), "search attribute") {
			t.Errorf("set %s answered %s", name, r.body)
		}
	}
	for i := range 14 {
		expect(t, a.do("POST", base+fmt.Sprintf("a%d", i), `{"lease":"`+run.Lease+`","value":1}`), 200, "set another")
	}
	r = a.do("POST", base+"one_too_many", `{"lease":"`+run.Lease+`","value":1}`)
	expect(t, r, 400, "a 17th attribute")
	if !strings.Contains(string(r.body), "at most 16") {
		t.Errorf("a 17th attribute answered %s", r.body)
	}
	expect(t, a.do("POST", "/v1/tasks/"+run.TaskID+"/suspend", `{"lease":"`+run.Lease+`","waits":{"nap":{"sleep":"1h"}}}`), 200, "suspend")
	expect(t, a.do("POST", base+"stage", `{"lease":"`+run.Lease+`","value":"shipped"}`), 409, "set by a run that ended")
}
