package apitest

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/flowd/flowd/httpapi"
)

// nested is a JSON array nested depth levels deep.
func nested(depth int) string {
	return strings.Repeat("[", depth) + strings.Repeat("]", depth)
}

// hostileRoute is a route and a body template whose %s is a value nested
// inside `outer` levels of the body.
type hostileRoute struct {
	name, method, path, body string
	outer                    int
	headers                  []string
}

// testHostileJSON: every JSON body, on every route that takes one, is
// refused with 400 and a message saying what and where when it nests deeper
// than 64 levels, holds invalid UTF-8 or an escaped NUL (in a value or a
// key) — the same on every store; 64 levels exactly are accepted.
func testHostileJSON(t *testing.T, newServer NewServer) {
	a := &api{t: t, url: newServer(t)}
	a.create("hj-patch", "")
	ifMatch := []string{"If-Match", `"0"`}
	routes := []hostileRoute{
		{"create state", "POST", "/v1/workflows", `{"state":{"variables":{"x":%s}}}`, 3, nil},
		{"create input", "POST", "/v1/workflows", `{"input":{"x":%s}}`, 2, nil},
		{"patch", "PATCH", "/v1/workflows/hj-patch", `{"x":%s}`, 1, ifMatch},
		{"step completion output", "POST", "/v1/workflows/hj-missing/steps/s/complete", `{"output":%s}`, 1, ifMatch},
		{"status", "POST", "/v1/workflows/hj-missing/status", `{"from":%s,"to":"RUNNING"}`, 1, nil},
		{"action", "POST", "/v1/workflows/hj-missing/cancel", `{"x":%s}`, 1, nil},
		{"batch", "POST", "/v1/batch/status", `{"status":%s}`, 1, nil},
		{"poll", "POST", "/v1/tasks/poll", `{"worker":"w","handlers":%s}`, 1, nil},
		{"task complete output", "POST", "/v1/tasks/hj-task/complete", `{"lease":"l","output":%s}`, 1, nil},
		{"task fail", "POST", "/v1/tasks/hj-task/fail", `{"lease":"l","error":%s}`, 1, nil},
		{"heartbeat", "POST", "/v1/tasks/hj-task/heartbeat", `{"lease":"l","lease_seconds":%s}`, 1, nil},
		{"definition (JSON form)", "PUT", "/v1/definitions/hj", `{"name":"hj","steps":[{"id":"a","type":"wait","input":%s}]}`, 3, nil},
	}
	values := []struct{ what, value, msg string }{
		{"65 levels", "", "JSON nested deeper than 64 levels at byte "},
		{"invalid UTF-8 in a value", "\"a\xffb\"", "invalid UTF-8 in a string at byte "},
		{"invalid UTF-8 in a key", "{\"k\xc3\":1}", "invalid UTF-8 in a string at byte "},
		{"an escaped NUL in a value", `"a\u0000b"`, `a string holds the escape \u0000 (NUL), which cannot be stored, at byte `},
		{"an escaped NUL in a key", `{"k\u0000":1}`, `\u0000 (NUL)`},
	}
	for _, rt := range routes {
		for _, v := range values {
			value := v.value
			if value == "" {
				value = nested(httpapi.MaxJSONDepth + 1 - rt.outer)
			}
			r := a.do(rt.method, rt.path, fmt.Sprintf(rt.body, value), rt.headers...)
			expect(t, r, 400, rt.name+" with "+v.what)
			var e httpapi.ErrorBody
			r.json(t, &e)
			if !strings.Contains(e.Message, v.msg) {
				t.Errorf("%s with %s: message should contain %q: %q", rt.name, v.what, v.msg, e.Message)
			}
		}
		// 64 levels are not refused for their depth (a route may refuse the
		// body for what it says).
		r := a.do(rt.method, rt.path, fmt.Sprintf(rt.body, nested(httpapi.MaxJSONDepth-rt.outer)), rt.headers...)
		if bytes.Contains(r.body, []byte("nested deeper")) {
			t.Errorf("%s nested 64 levels deep was refused: %s", rt.name, r.body)
		}
	}
	// Escapes that only look like a NUL are fine: an escaped backslash
	// followed by "u0000", and other control characters.
	expect(t, a.do("POST", "/v1/workflows", `{"input":{"a":"\\u0000","b":"\u0001"}}`), 201, `"\\u0000" is a backslash and u0000`)

	// 64 levels exactly are stored and read back, in state, input and output.
	deepState := `{"state":{"variables":{"x":` + nested(httpapi.MaxJSONDepth-3) + `}}}`
	expect(t, a.do("POST", "/v1/workflows", deepState), 201, "create with a state 64 levels deep in the body")
	expect(t, a.do("POST", "/v1/workflows", `{"input":{"x":`+nested(httpapi.MaxJSONDepth-2)+`}}`), 201, "create with input 64 levels deep in the body")
	r := a.do("PATCH", "/v1/workflows/hj-patch", `{"y":`+nested(httpapi.MaxJSONDepth-1)+`}`, "If-Match", `"1"`)
	expect(t, r, 200, "patch 64 levels deep (again)")
	if !bytes.Contains(r.body, []byte(nested(httpapi.MaxJSONDepth-1))) {
		t.Errorf("the patched value is not in the state: %.300s", r.body)
	}
	a.create("hj-step", `{"steps":{"s":{"status":"WAITING"}}}`)
	expect(t, a.do("POST", "/v1/workflows/hj-step/steps/s/complete", `{"output":`+nested(httpapi.MaxJSONDepth-1)+`}`, ifMatch...), 200, "step output 64 levels deep")
	r = a.do("GET", "/v1/workflows/hj-patch", "")
	expect(t, r, 200, "get the deep state")
	if r.header.Get("ETag") != `"2"` {
		t.Errorf("refused patches changed the instance: ETag %s, want the two accepted ones", r.header.Get("ETag"))
	}

	// input must be an object; absent or null mean {}.
	for _, in := range []string{`[1]`, `"x"`, `1`, `true`} {
		r := a.do("POST", "/v1/workflows", `{"input":`+in+`}`)
		expect(t, r, 400, "input "+in)
		if !bytes.Contains(r.body, []byte(`\"input\" must be a JSON object`)) {
			t.Errorf("input %s: %s", in, r.body)
		}
	}
	expect(t, a.do("PUT", "/v1/definitions/hj-one", `{"name":"hj-one","steps":[{"id":"w","type":"wait"}]}`), 201, "definition")
	expect(t, a.do("POST", "/v1/workflows", `{"definition":"hj-one","input":[1]}`), 400, "input not an object, with a definition")
	if r := a.do("POST", "/v1/workflows", `{"definition":"hj-one"}`); r.status != 201 || !bytes.Contains(r.body, []byte(`"input":{}`)) {
		t.Errorf("absent input should be {}: %d %s", r.status, r.body)
	}
}

// testStateLimit: a change that would make a state larger than the server's
// limit (4 MiB by default) is refused with 413 and writes nothing: a merge
// patch, a step completed from outside, a remote worker's task output. The
// limit is reached with several patches, each under the 1 MiB body limit.
func testStateLimit(t *testing.T, newServer NewServer) {
	a := &api{t: t, url: newServer(t)}
	const quarter = 1_000_000 // four of them stay under 4 MiB (4,194,304 bytes)
	grow := func(id string) {
		t.Helper()
		for i := range 4 {
			body := fmt.Sprintf(`{"fill%d":"%s"}`, i, strings.Repeat("a", quarter))
			expect(t, a.do("PATCH", "/v1/workflows/"+id, body, "If-Match", "*"), 200, fmt.Sprintf("%s: patch %d", id, i))
		}
	}
	over := `"` + strings.Repeat("b", 300_000) + `"`
	versionOf := func(id string) string {
		t.Helper()
		return a.do("GET", "/v1/workflows/"+id, "").header.Get("ETag")
	}
	check413 := func(r resp, what string) {
		t.Helper()
		expect(t, r, 413, what)
		if !bytes.Contains(r.body, []byte("more than the limit of 4194304 bytes")) {
			t.Errorf("%s: the message should name the limit: %s", what, r.body)
		}
	}

	// One grown instance serves the patch and the step completion: growing
	// a state to 4 MiB is most of this test's time.
	a.create("sl-step", `{"steps":{"s":{"status":"WAITING"}}}`)
	grow("sl-step")
	check413(a.do("POST", "/v1/workflows/sl-step/steps/s/complete", `{"output":`+over+`}`, "If-Match", `"4"`), "step output past the limit")
	if v := versionOf("sl-step"); v != `"4"` {
		t.Errorf("a refused step completion changed the version: %s", v)
	}
	check413(a.do("PATCH", "/v1/workflows/sl-step", `{"more":`+over+`}`, "If-Match", `"4"`), "patch past the limit")
	if v := versionOf("sl-step"); v != `"4"` {
		t.Errorf("a refused patch changed the version: %s", v)
	}
	expect(t, a.do("PATCH", "/v1/workflows/sl-step", `{"fill0":null,"more":`+over+`}`, "If-Match", `"4"`), 200, "a patch that stays under the limit")
	expect(t, a.do("POST", "/v1/workflows/sl-step/steps/s/complete", `{"output":1}`, "If-Match", `"5"`), 200, "a small output")

	expect(t, a.do("PUT", "/v1/definitions/sl", `{"name":"sl","steps":[{"id":"a","type":"task","handler":"sl-remote"}]}`), 201, "definition")
	expect(t, a.do("POST", "/v1/workflows", `{"id":"sl-task","definition":"sl"}`), 201, "start")
	grow("sl-task")
	// A long lease: the refused completion and the reads around it must not
	// outlast it on a loaded machine, or the retry below meets a lost lease.
	r := a.do("POST", "/v1/tasks/poll", `{"worker":"w","handlers":["sl-remote"],"wait_seconds":5,"lease_seconds":600}`)
	expect(t, r, 200, "poll")
	var task httpapi.TaskResponse
	r.json(t, &task)
	before := versionOf("sl-task")
	check413(a.do("POST", "/v1/tasks/"+task.TaskID+"/complete", `{"lease":"`+task.Lease+`","output":`+over+`}`), "task output past the limit")
	if v := versionOf("sl-task"); v != before {
		t.Errorf("a refused task completion changed the version: %s, was %s", v, before)
	}
	// Nothing was written: the lease still holds, and a smaller output completes the task.
	expect(t, a.do("POST", "/v1/tasks/"+task.TaskID+"/complete", `{"lease":"`+task.Lease+`","output":{"ok":true}}`), 200, "a small task output")
	if st := a.do("GET", "/v1/workflows/sl-task", "").instance(t)["status"]; st != "COMPLETED" {
		t.Errorf("workflow %v after its only step completed", st)
	}
}
