package apitest

import (
	"bytes"
	"fmt"
	"testing"
)

// testDeleteWorkflow checks every status of DELETE /v1/workflows/{id} and
// their order: 428 → 400 → 404 → 409 → 412, as for PATCH.
func testDeleteWorkflow(t *testing.T, newServer NewServer) {
	a := &api{t: t, url: newServer(t)}
	del := func(id, ifMatch string) resp {
		t.Helper()
		return a.do("DELETE", "/v1/workflows/"+id, "", "If-Match", ifMatch)
	}
	// The order of errors on an unknown id.
	expect(t, del("nope", ""), 428, "no If-Match on an unknown id")
	expect(t, del("nope", "0"), 400, "malformed If-Match on an unknown id")
	expect(t, del("nope", `"1" "2"`), 400, "a list without commas")
	expect(t, del("nope", `"0"`), 404, "unknown id")
	expect(t, del("nope", "*"), 404, "unknown id with *")

	// A live instance: 409 whatever If-Match says, before 412.
	a.create("live", `{"variables":{"n":1}}`)
	for _, im := range []string{`"0"`, `"9"`, "*"} {
		r := del("live", im)
		expect(t, r, 409, "a PENDING instance with If-Match "+im)
		if !bytes.Contains(r.body, []byte("PENDING")) {
			t.Errorf("409 for a live instance should name its status: %s", r.body)
		}
	}
	expect(t, a.do("POST", "/v1/workflows/live/status", `{"from":"PENDING","to":"RUNNING"}`), 200, "start live")
	expect(t, del("live", `"1"`), 409, "a RUNNING instance")
	expect(t, a.do("POST", "/v1/workflows/live/pause", ""), 200, "pause live")
	expect(t, del("live", `"2"`), 409, "a PAUSED instance")
	expect(t, del("live", ""), 428, "no If-Match on a live instance")
	expect(t, a.do("GET", "/v1/workflows/live", ""), 200, "a live instance after refused deletes")

	// A finished instance: 412 for a tag that does not match.
	a.create("done", "")
	expect(t, a.do("POST", "/v1/workflows/done/cancel", ""), 200, "cancel done") // version 1
	for _, im := range []string{`"0"`, `W/"1"`, `"0abc"`, `"2", "3"`} {
		expect(t, del("done", im), 412, "a stale If-Match "+im)
	}
	expect(t, del("done", "0"), 400, "malformed If-Match on a finished instance")
	r := del("done", `"5", "1"`)
	expect(t, r, 204, "a list naming the version")
	if len(r.body) != 0 {
		t.Errorf("204 with a body: %q", r.body)
	}
	expect(t, a.do("GET", "/v1/workflows/done", ""), 404, "a deleted workflow")
	expect(t, a.do("GET", "/v1/workflows/done/history", ""), 404, "a deleted workflow's history")
	expect(t, a.do("POST", "/v1/workflows/done/retry", ""), 404, "retrying a deleted workflow")
	expect(t, del("done", "*"), 404, "deleting it again")
	if r := a.do("GET", "/v1/workflows?limit=1000", ""); bytes.Contains(r.body, []byte(`"id":"done"`)) {
		t.Errorf("the deleted workflow is still listed: %s", r.body)
	}

	// Every finished status can be deleted, with * or the exact version.
	for i, to := range []string{"COMPLETED", "FAILED", "TIMED_OUT"} {
		id := fmt.Sprintf("fin-%d", i)
		a.create(id, "")
		expect(t, a.do("POST", "/v1/workflows/"+id+"/status", `{"from":"PENDING","to":"RUNNING"}`), 200, "start "+id)
		expect(t, a.do("POST", "/v1/workflows/"+id+"/status", `{"from":"RUNNING","to":"`+to+`"}`), 200, to+" "+id)
		im := `"2"`
		if i%2 == 1 {
			im = "*"
		}
		expect(t, del(id, im), 204, "delete a "+to+" instance with If-Match "+im)
		expect(t, a.do("GET", "/v1/workflows/"+id, ""), 404, "a deleted "+to+" instance")
	}
	// A retried instance is live again.
	a.create("retried", "")
	expect(t, a.do("POST", "/v1/workflows/retried/status", `{"from":"PENDING","to":"RUNNING"}`), 200, "start retried")
	expect(t, a.do("POST", "/v1/workflows/retried/status", `{"from":"RUNNING","to":"FAILED"}`), 200, "fail retried")
	expect(t, a.do("POST", "/v1/workflows/retried/retry", ""), 200, "retry")
	expect(t, del("retried", `"3"`), 409, "a retried (RUNNING) instance at its version")
}

// testDeleteDefinition checks DELETE /v1/definitions/{name}: 409 while an
// instance is live (RUNNING, PAUSED), 204, 404; finished instances stay
// readable; a start after the delete is 404; a new PUT continues the
// revision numbers.
func testDeleteDefinition(t *testing.T, newServer NewServer) {
	a := &api{t: t, url: newServer(t)}
	def := func(attempts int) string {
		return fmt.Sprintf(`{"name": "dd", "steps": [{"id": "a", "type": "task", "handler": "remote", "retry": {"max_attempts": %d}}]}`, attempts)
	}
	expect(t, a.do("PUT", "/v1/definitions/dd", def(1)), 201, "revision 1")
	expect(t, a.do("PUT", "/v1/definitions/dd", def(2)), 201, "revision 2")
	expect(t, a.do("POST", "/v1/workflows", `{"id":"old","definition":"dd"}`), 201, "start old")
	expect(t, a.do("POST", "/v1/workflows/old/cancel", ""), 200, "cancel old")
	expect(t, a.do("POST", "/v1/workflows", `{"id":"w","definition":"dd"}`), 201, "start w")

	r := a.do("DELETE", "/v1/definitions/dd", "")
	expect(t, r, 409, "a definition with a RUNNING workflow")
	if !bytes.Contains(r.body, []byte(`definition \"dd\" has workflows that are not finished`)) {
		t.Errorf("409 message: %s", r.body)
	}
	expect(t, a.do("POST", "/v1/workflows/w/pause", ""), 200, "pause w")
	expect(t, a.do("DELETE", "/v1/definitions/dd", ""), 409, "a definition with a PAUSED workflow")
	expect(t, a.do("GET", "/v1/definitions/dd?revision=1", ""), 200, "revision 1 after refused deletes")
	expect(t, a.do("POST", "/v1/workflows/w/cancel", ""), 200, "cancel w")

	r = a.do("DELETE", "/v1/definitions/dd", "")
	expect(t, r, 204, "delete a definition whose workflows are finished")
	if len(r.body) != 0 {
		t.Errorf("204 with a body: %q", r.body)
	}
	expect(t, a.do("GET", "/v1/definitions/dd", ""), 404, "the deleted definition")
	expect(t, a.do("GET", "/v1/definitions/dd?revision=2", ""), 404, "a revision of the deleted definition")
	if r := a.do("GET", "/v1/definitions", ""); bytes.Contains(r.body, []byte(`"name":"dd"`)) {
		t.Errorf("the deleted definition is still listed: %s", r.body)
	}
	r = a.do("POST", "/v1/workflows", `{"id":"after","definition":"dd"}`)
	expect(t, r, 404, "a start after the delete")
	if !bytes.Contains(r.body, []byte(`unknown definition \"dd\"`)) {
		t.Errorf("start after the delete: %s", r.body)
	}
	expect(t, a.do("GET", "/v1/workflows/after", ""), 404, "the refused start's id")
	// Its finished workflows stay readable, and can be deleted.
	r = a.do("GET", "/v1/workflows/w", "")
	expect(t, r, 200, "a finished workflow of the deleted definition")
	if m := r.instance(t); m["status"] != "CANCELLED" || m["definition_revision"] != float64(2) {
		t.Errorf("the finished workflow: %s", r.body)
	}
	expect(t, a.do("GET", "/v1/workflows/w/history", ""), 200, "its history")
	expect(t, a.do("GET", "/v1/workflows?definition=dd", ""), 200, "listing by the deleted definition")
	expect(t, a.do("DELETE", "/v1/workflows/old", "", "If-Match", "*"), 204, "delete a finished workflow of the deleted definition")

	expect(t, a.do("DELETE", "/v1/definitions/dd", ""), 404, "deleting it again")
	expect(t, a.do("DELETE", "/v1/definitions/never", ""), 404, "an unknown definition")

	// The revision numbers go on: 3 after 1 and 2, even for revision 1's spec.
	r = a.do("PUT", "/v1/definitions/dd", def(1))
	expect(t, r, 201, "PUT after the delete")
	if !bytes.Contains(r.body, []byte(`"revision":3`)) {
		t.Errorf("PUT after the delete: %s, want revision 3", r.body)
	}
	r = a.do("POST", "/v1/workflows", `{"id":"new","definition":"dd"}`)
	expect(t, r, 201, "a start after the new PUT")
	if m := r.instance(t); m["definition_revision"] != float64(3) {
		t.Errorf("the new start: %s, want revision 3", r.body)
	}
}
