// Package apitest is the end-to-end suite of the HTTP API:
// raw HTTP requests against a running server, checking exact status codes,
// headers and error bodies. It is a normal package so that the same suite runs
// against httpapi on httptest (package httpapi's tests) and against the real
// `flowd serve` (cmd/flowd's tests), on both stores.
package apitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowd/flowd/httpapi"
)

// NewServer starts a server on a fresh, migrated database (with bearer tokens
// when given, each a line of a token file: "TOKEN" or "TOKEN ROLE [NAME]")
// and returns its base URL; the test's cleanup stops it.
type NewServer func(t *testing.T, tokens ...string) string

// Run runs the whole suite: one server for the workflow routes (subtests share
// it, in order), one with tokens, one for the definitions and tasks routes.
func Run(t *testing.T, newServer NewServer) { run(t, newServer, false) }

// RunWiring runs the part of the suite that depends on how a server is put
// together — its engine with workers and loops, tokens, Host check, metrics,
// logging and listener — and leaves out the cases that only exercise the
// handler and the store (contention, size limits, paging, hostile JSON,
// idempotency keys), which Run covers on both stores through httpapi. It is
// for a second server assembly, such as the real `flowd serve`, where running
// those cases again would prove nothing new and cost minutes under -race.
func RunWiring(t *testing.T, newServer NewServer) { run(t, newServer, true) }

// suiteCase is one top-level case; handlerOnly marks the cases RunWiring
// leaves out.
type suiteCase struct {
	name        string
	run         func(t *testing.T, newServer NewServer)
	handlerOnly bool
}

var suiteCases = []suiteCase{
	{"Auth", testAuth, false},
	{"Actors", testActors, false},
	{"DefinitionsAndTasks", testDefinitionAndTaskRoutes, false},
	{"EngineOwnsSteps", testEngineOwnsSteps, false},
	{"StopCancelsSteps", testStopCancelsSteps, false},
	{"Workers", testWorkers, false},
	{"IDPrefix", testIDPrefix, true},
	{"ParentFilter", testParentFilter, true},
	{"Rerun", testRerun, true},
	{"Search", testSearch, false},
	{"CodeSearch", testCodeSearch, false},
	{"LockedWriters", testLockedWriters, true},
	{"IdempotencyKey", testIdempotencyKey, true},
	{"HistoryPages", testHistoryPages, true},
	{"ListChunks", testListChunks, true},
	{"HostileJSON", testHostileJSON, true},
	// The server's own limit is wired through its engine; cmd/flowd's
	// TestServeMaxStateBytes checks that wiring with --max-state-bytes.
	{"StateLimit", testStateLimit, true},
	{"DeleteWorkflow", testDeleteWorkflow, false},
	{"DeleteDefinition", testDeleteDefinition, false},
	{"DefinitionRetention", testDefinitionRetention, false},
	{"ControlFlow", testControlFlow, false},
	{"ForeachTasks", testForeachTasks, false},
	{"Events", testEvents, false},
	{"Schedules", testSchedules, false},
	{"Bulk", testBulk, false},
	{"Concurrency", testConcurrency, false},
	{"FlowControl", testFlowControl, false},
	// Serverless Workflow documents run on the server's engine, its http
	// client and its workers.
	{"Serverless", testServerless, false},
	{"CodeWorkflows", testCodeWorkflows, false},
}

func run(t *testing.T, newServer NewServer, wiringOnly bool) {
	t.Run("Workflows", func(t *testing.T) {
		a := &api{t: t, url: newServer(t)}
		t.Run("Create", func(t *testing.T) { testCreate(t, a) })
		t.Run("Get", func(t *testing.T) { testGet(t, a) })
		t.Run("List", func(t *testing.T) { testList(t, a) })
		t.Run("Patch", func(t *testing.T) { testPatch(t, a) })
		t.Run("PatchOrder", func(t *testing.T) { testPatchOrder(t, a) })
		t.Run("Status", func(t *testing.T) { testStatus(t, a) })
		t.Run("Actions", func(t *testing.T) { testActions(t, a) })
		t.Run("CompleteStep", func(t *testing.T) { testCompleteStep(t, a) })
		t.Run("Batch", func(t *testing.T) { testBatch(t, a) })
		t.Run("History", func(t *testing.T) { testHistory(t, a) })
		t.Run("Limits", func(t *testing.T) { testLimits(t, a) })
		t.Run("Browsers", func(t *testing.T) { testBrowsers(t, a) })
		t.Run("Health", func(t *testing.T) { testHealth(t, a) })
		t.Run("OpenAPI", func(t *testing.T) { testOpenAPI(t, a) })
		if !wiringOnly {
			// Store contention through the handler: nothing a server
			// assembly changes.
			t.Run("ConcurrentPatch", func(t *testing.T) { testConcurrentPatch(t, a) })
		}
	})
	for _, c := range suiteCases {
		if wiringOnly && c.handlerOnly {
			continue
		}
		t.Run(c.name, func(t *testing.T) { c.run(t, newServer) })
	}
}

// api is one server under test and a tiny raw-HTTP client for it: the tests
// check exact status codes and headers, so they do not go through
// httpapi.Client.
type api struct {
	t     *testing.T
	url   string
	token string
}

type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decoding %s: %v", r.body, err)
	}
}

func (r resp) instance(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	r.json(t, &m)
	return m
}

// do sends a request; headers come in name/value pairs.
func (a *api) do(method, path, body string, headers ...string) resp {
	a.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, a.url+path, rd)
	if err != nil {
		a.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Host" {
			req.Host = headers[i+1]
			continue
		}
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{status: res.StatusCode, header: res.Header, body: b}
}

// expect checks the status and, for errors, the JSON error body shape.
func expect(t *testing.T, r resp, status int, what string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s: status %d, want %d; body %s", what, r.status, status, r.body)
	}
	if status >= 400 {
		if ct := r.header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: error Content-Type %q", what, ct)
		}
		var e httpapi.ErrorBody
		if err := json.Unmarshal(r.body, &e); err != nil || e.Error != http.StatusText(status) || e.Message == "" {
			t.Errorf("%s: error body %s does not have the reason phrase %q and a message", what, r.body, http.StatusText(status))
		}
	}
}

func (a *api) create(id, state string) resp {
	a.t.Helper()
	body := fmt.Sprintf(`{"id":%q}`, id)
	if state != "" {
		body = fmt.Sprintf(`{"id":%q,"state":%s}`, id, state)
	}
	r := a.do("POST", "/v1/workflows", body)
	expect(a.t, r, 201, "create "+id)
	return r
}

func testCreate(t *testing.T, a *api) {
	r := a.do("POST", "/v1/workflows", `{"input":{"sku":"A-1","n":9007199254740993},"state":{"variables":{"counter":0}}}`)
	expect(t, r, 201, "create")
	inst := r.instance(t)
	id, _ := inst["id"].(string)
	if id == "" || r.header.Get("Location") != "/v1/workflows/"+id {
		t.Errorf("Location %q for id %q", r.header.Get("Location"), id)
	}
	if r.header.Get("ETag") != `"0"` || inst["version"] != 0.0 || inst["status"] != "PENDING" || inst["definition"] != "" {
		t.Errorf("new instance: ETag %s, %v", r.header.Get("ETag"), inst)
	}
	if !bytes.Contains(r.body, []byte(`9007199254740993`)) {
		t.Errorf("input number changed: %s", r.body)
	}
	for _, k := range []string{"created_at", "updated_at", "state", "input"} {
		if _, ok := inst[k]; !ok {
			t.Errorf("instance lacks %q: %s", k, r.body)
		}
	}
	a.create("client-id.1:x", "")
	expect(t, a.do("POST", "/v1/workflows", `{"id":"client-id.1:x"}`), 409, "existing id")
	expect(t, a.do("POST", "/v1/workflows", `{"id":"bad id"}`), 400, "invalid id")
	expect(t, a.do("POST", "/v1/workflows", `{"id":"`+strings.Repeat("x", 129)+`"}`), 400, "long id")
	expect(t, a.do("POST", "/v1/workflows", `{"definition":"nope"}`), 404, "unknown definition")
	expect(t, a.do("POST", "/v1/workflows", `{"idd":"x"}`), 400, "unknown field")
	expect(t, a.do("POST", "/v1/workflows", `{"id":`), 400, "malformed JSON")
	expect(t, a.do("POST", "/v1/workflows", `{} {}`), 400, "trailing data")
	expect(t, a.do("POST", "/v1/workflows", `[]`), 400, "array body")
	expect(t, a.do("POST", "/v1/workflows", ``), 201, "empty body: a free-form instance with defaults")
	if r := a.do("POST", "/v1/workflows", `{"input":null}`); r.status != 201 || !bytes.Contains(r.body, []byte(`"input":{}`)) {
		t.Errorf("input null should be stored as {}: %d %s", r.status, r.body)
	}
	expect(t, a.do("POST", "/v1/workflows", `{"id":".."}`), 400, "reserved id")
	expect(t, a.do("POST", "/v1/workflows", `{"state":{"steps":{"a,b":{}}}}`), 400, "invalid step id in state")
	expect(t, a.do("POST", "/v1/workflows", `{"state":[1]}`), 400, "state not an object")
	expect(t, a.do("POST", "/v1/workflows", `{"state":{"steps":{"a":{"status":"DONE"}}}}`), 400, "bad step status")
}

func testGet(t *testing.T, a *api) {
	a.create("get-1", "")
	r := a.do("GET", "/v1/workflows/get-1", "")
	expect(t, r, 200, "get")
	if r.header.Get("ETag") != `"0"` {
		t.Errorf("ETag %q", r.header.Get("ETag"))
	}
	r = a.do("GET", "/v1/workflows/get-1", "", "If-None-Match", `"0"`)
	if r.status != 304 || len(r.body) != 0 || r.header.Get("ETag") != `"0"` {
		t.Errorf("If-None-Match match: %d %q %q", r.status, r.body, r.header.Get("ETag"))
	}
	if r = a.do("GET", "/v1/workflows/get-1", "", "If-None-Match", `W/"0"`); r.status != 304 {
		t.Errorf("weak If-None-Match should match: %d", r.status)
	}
	if r = a.do("GET", "/v1/workflows/get-1", "", "If-None-Match", `*`); r.status != 304 {
		t.Errorf("If-None-Match * should match: %d", r.status)
	}
	expect(t, a.do("GET", "/v1/workflows/get-1", "", "If-None-Match", `"5"`), 200, "If-None-Match other version")
	expect(t, a.do("GET", "/v1/workflows/get-1", "", "If-None-Match", `5`), 400, "malformed If-None-Match")
	expect(t, a.do("GET", "/v1/workflows/nope", ""), 404, "unknown id")
	expect(t, a.do("PUT", "/v1/workflows/get-1", ""), 405, "method not allowed")
	expect(t, a.do("GET", "/v1/nothing-here", ""), 404, "unknown route")
}

func testList(t *testing.T, a *api) {
	for i := range 5 {
		a.create(fmt.Sprintf("list-%d", i), "")
	}
	seen := map[string]bool{}
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 100 {
			t.Fatal("paging does not end")
		}
		r := a.do("GET", "/v1/workflows?limit=2&cursor="+cursor, "")
		expect(t, r, 200, "list")
		var page httpapi.ListWorkflowsResponse
		r.json(t, &page)
		if len(page.Workflows) > 2 {
			t.Fatalf("page of %d with limit 2", len(page.Workflows))
		}
		for _, w := range page.Workflows {
			if seen[w.ID] {
				t.Fatalf("%s listed twice", w.ID)
			}
			seen[w.ID] = true
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	for i := range 5 {
		if !seen[fmt.Sprintf("list-%d", i)] {
			t.Errorf("list-%d never listed", i)
		}
	}
	r := a.do("GET", "/v1/workflows?status=PENDING&limit=1000", "")
	expect(t, r, 200, "status filter")
	var page httpapi.ListWorkflowsResponse
	r.json(t, &page)
	for _, w := range page.Workflows {
		if w.Status != "PENDING" {
			t.Errorf("status filter returned %s", w.Status)
		}
	}
	for _, q := range []string{"limit=0", "limit=1001", "limit=x", "status=DONE", "cursor=%21%21"} {
		expect(t, a.do("GET", "/v1/workflows?"+q, ""), 400, "list "+q)
	}
}

func testPatch(t *testing.T, a *api) {
	a.create("patch-1", `{"variables":{"a":1,"b":2},"custom":true}`)
	r := a.do("PATCH", "/v1/workflows/patch-1", `{"variables":{"b":null,"c":3}}`, "If-Match", `"0"`)
	expect(t, r, 200, "patch")
	if r.header.Get("ETag") != `"1"` {
		t.Errorf("ETag after patch %q", r.header.Get("ETag"))
	}
	var inst struct {
		Version int
		State   map[string]any
	}
	r.json(t, &inst)
	vars := inst.State["variables"].(map[string]any)
	if vars["a"] != 1.0 || vars["c"] != 3.0 || vars["b"] != nil || inst.State["custom"] != true || inst.Version != 1 {
		t.Errorf("merge patch result %s", r.body)
	}
	// Stale, weak, unknown and non-version tags never match.
	for _, tag := range []string{`"0"`, `W/"1"`, `"0abc"`, `"2"`, `"01"`} {
		expect(t, a.do("PATCH", "/v1/workflows/patch-1", `{"x":1}`, "If-Match", tag), 412, "If-Match "+tag)
	}
	expect(t, a.do("PATCH", "/v1/workflows/patch-1", `{"x":1}`, "If-Match", `"7", "1"`), 200, "list containing the current version")
	expect(t, a.do("PATCH", "/v1/workflows/patch-1", `{"x":2}`, "If-Match", `*`), 200, "If-Match *")
	// Without Content-Type the body is taken as JSON; with merge-patch+json too.
	expect(t, a.do("PATCH", "/v1/workflows/patch-1", `{"x":3}`, "If-Match", `"3"`, "Content-Type", ""), 200, "no content type")
	expect(t, a.do("PATCH", "/v1/workflows/patch-1", `{"x":4}`, "If-Match", `"4"`, "Content-Type", "application/merge-patch+json"), 200, "merge-patch content type")
	for _, bad := range []string{`0`, `"0`, `W/0`, `"1" "2"`, `*, "1"`} {
		expect(t, a.do("PATCH", "/v1/workflows/patch-1", `{"x":1}`, "If-Match", bad), 400, "malformed If-Match "+bad)
	}
	expect(t, a.do("PATCH", "/v1/workflows/patch-1", `{"x":1}`), 428, "no If-Match")
	expect(t, a.do("PATCH", "/v1/workflows/patch-1", `[1]`, "If-Match", `"5"`), 400, "array patch")
	expect(t, a.do("PATCH", "/v1/workflows/patch-1", `{"x":`, "If-Match", `"5"`), 400, "malformed patch")
	expect(t, a.do("PATCH", "/v1/workflows/patch-1", `{"steps":{"a,b":{}}}`, "If-Match", `"5"`), 400, "invalid step id in patch")
	expect(t, a.do("PATCH", "/v1/workflows/patch-1", `{"steps":{"a":{"status":"NOPE"}}}`, "If-Match", `"5"`), 400, "bad step status in patch")
	expect(t, a.do("PATCH", "/v1/workflows/patch-1", `{"x":1}`, "If-Match", `"5"`, "Content-Type", "text/plain"), 415, "wrong content type")
	r = a.do("GET", "/v1/workflows/patch-1", "")
	if r.header.Get("ETag") != `"5"` {
		t.Errorf("rejected patches changed the instance: ETag %s", r.header.Get("ETag"))
	}
	expect(t, a.do("POST", "/v1/workflows/patch-1/cancel", ""), 200, "cancel")
	expect(t, a.do("PATCH", "/v1/workflows/patch-1", `{"x":1}`, "If-Match", `"6"`), 409, "terminal instance")
	expect(t, a.do("PATCH", "/v1/workflows/patch-1", `{"x":1}`, "If-Match", `"1"`), 409, "terminal instance beats stale tag")
	expect(t, a.do("PATCH", "/v1/workflows/patch-1", `{"x":1}`, "If-Match", `*`), 409, "terminal instance, *")
	expect(t, a.do("PATCH", "/v1/workflows/missing", `{"x":1}`, "If-Match", `*`), 404, "unknown instance, *")
	a.create("patch-2", `{"variables":{"a":1}}`)
	expect(t, a.do("PATCH", "/v1/workflows/patch-2", `{"variables":null,"steps":{"s":{"status":"WAITING"}}}`, "If-Match", `*`), 200, "patch, *")
	r = a.do("GET", "/v1/workflows/patch-2", "")
	if r.header.Get("ETag") != `"1"` || stepStatuses(t, r)["s"] != "WAITING" || bytes.Contains(r.body, []byte(`"a":1`)) {
		t.Errorf("after PATCH with *: %s %s", r.header.Get("ETag"), r.body)
	}
}

func testPatchOrder(t *testing.T, a *api) {
	expect(t, a.do("PATCH", "/v1/workflows/missing", `nope`, "Content-Type", "text/plain"), 428, "428 before everything")
	expect(t, a.do("PATCH", "/v1/workflows/missing", `nope`, "If-Match", `"0"`, "Content-Type", "text/plain"), 400, "400 before 415")
	expect(t, a.do("PATCH", "/v1/workflows/missing", `{}`, "If-Match", `"0"`, "Content-Type", "text/plain"), 415, "415 before 404")
	expect(t, a.do("PATCH", "/v1/workflows/missing", `{}`, "If-Match", `"0"`), 404, "404 after 415")
	expect(t, a.do("PATCH", "/v1/workflows/missing", `{}`), 428, "428 before 404")
	// A body that could only make the state invalid is a 400 before the
	// instance is read: not a 404, 409 or 412.
	a.create("po-1", "")
	for _, body := range []string{`{"steps":{"s1":{"error":5}}}`, `{"steps":{"s1":{"attempts":"2"}}}`, `{"steps":{"s1":{"status":"DONE"}}}`, `{"variables":[]}`} {
		expect(t, a.do("PATCH", "/v1/workflows/missing", body, "If-Match", `"0"`), 400, "400 before 404: "+body)
		expect(t, a.do("PATCH", "/v1/workflows/po-1", body, "If-Match", `"7"`), 400, "400 before 412: "+body)
	}
}

func testStatus(t *testing.T, a *api) {
	a.create("st-1", "")
	r := a.do("POST", "/v1/workflows/st-1/status", `{"from":"PENDING","to":"RUNNING"}`)
	expect(t, r, 200, "transition")
	if r.header.Get("ETag") != `"1"` || r.instance(t)["status"] != "RUNNING" {
		t.Errorf("after transition: %s %s", r.header.Get("ETag"), r.body)
	}
	expect(t, a.do("POST", "/v1/workflows/st-1/status", `{"from":"PENDING","to":"RUNNING"}`), 409, "from does not match")
	expect(t, a.do("POST", "/v1/workflows/st-1/status", `{"from":"PENDING","to":"PAUSED"}`), 422, "not in the table")
	expect(t, a.do("POST", "/v1/workflows/nope/status", `{"from":"PENDING","to":"PAUSED"}`), 422, "422 before 404")
	expect(t, a.do("POST", "/v1/workflows/nope/status", `{"from":"PENDING","to":"RUNNING"}`), 404, "unknown id")
	expect(t, a.do("POST", "/v1/workflows/nope/status", `{"from":"PENDING","to":"DONE"}`), 400, "unknown status before 404")
	expect(t, a.do("POST", "/v1/workflows/st-1/status", `{"from":"RUNNING","to":"PAUSED","why":1}`), 400, "unknown field")
	expect(t, a.do("POST", "/v1/workflows/st-1/status", `{"from":"RUNNING"}`), 400, "missing to")
}

func testActions(t *testing.T, a *api) {
	a.create("act-1", "")
	r := a.do("POST", "/v1/workflows/act-1/pause", "")
	expect(t, r, 409, "pause from PENDING")
	if !bytes.Contains(r.body, []byte(`"message":"cannot pause workflow act-1: it is PENDING`)) {
		t.Errorf("409 message should say why plainly: %s", r.body)
	}
	expect(t, a.do("POST", "/v1/workflows/act-1/status", `{"from":"PENDING","to":"RUNNING"}`), 200, "start")
	for _, step := range []struct{ action, body, status string }{
		{"pause", "", "PAUSED"}, {"resume", "{}", "RUNNING"}, {"cancel", "", "CANCELLED"},
	} {
		r := a.do("POST", "/v1/workflows/act-1/"+step.action, step.body)
		expect(t, r, 200, step.action)
		if got := r.instance(t)["status"]; got != step.status {
			t.Errorf("%s → %v, want %s", step.action, got, step.status)
		}
		if r.header.Get("ETag") == "" {
			t.Errorf("%s: no ETag", step.action)
		}
	}
	expect(t, a.do("POST", "/v1/workflows/act-1/resume", ""), 409, "resume a cancelled instance")
	expect(t, a.do("POST", "/v1/workflows/act-1/retry", ""), 409, "retry a cancelled instance")
	expect(t, a.do("POST", "/v1/workflows/act-1/pause", `{"x":1}`), 400, "unknown field in action body")
	expect(t, a.do("POST", "/v1/workflows/nope/cancel", ""), 404, "unknown id")

	a.create("act-2", "")
	a.do("POST", "/v1/workflows/act-2/status", `{"from":"PENDING","to":"RUNNING"}`)
	expect(t, a.do("POST", "/v1/workflows/act-2/status", `{"from":"RUNNING","to":"FAILED"}`), 200, "fail")
	r = a.do("POST", "/v1/workflows/act-2/retry", "")
	expect(t, r, 200, "retry")
	if r.instance(t)["status"] != "RUNNING" {
		t.Errorf("retry → %s", r.body)
	}
}

func testCompleteStep(t *testing.T, a *api) {
	a.create("cs-1", `{"steps":{"approve":{"status":"WAITING"},"done":{"status":"COMPLETED","output":1}}}`)
	path := "/v1/workflows/cs-1/steps/approve/complete"
	expect(t, a.do("POST", path, `{"output":{"ok":true}}`), 428, "no If-Match")
	expect(t, a.do("POST", path, `{"output":1}`, "If-Match", `W/0`), 400, "malformed If-Match")
	expect(t, a.do("POST", path, `{"outpt":1}`, "If-Match", `"0"`), 400, "unknown field")
	expect(t, a.do("POST", path, `{"output":1}`, "If-Match", `"9"`), 412, "stale")
	expect(t, a.do("POST", "/v1/workflows/cs-1/steps/nope/complete", `{"output":1}`, "If-Match", `"9"`), 404, "unknown step before 412")
	expect(t, a.do("POST", "/v1/workflows/cs-1/steps/a,b/complete", `{"output":1}`, "If-Match", `"0"`), 404, "hostile step id")
	expect(t, a.do("POST", "/v1/workflows/cs-1/steps/done/complete", `{"output":2}`, "If-Match", `"9"`), 409, "completed step before 412")
	expect(t, a.do("POST", "/v1/workflows/nope/steps/approve/complete", `{"output":1}`, "If-Match", `"0"`), 404, "unknown workflow")
	r := a.do("POST", path, `{"output":{"ok":true}}`, "If-Match", `"0"`)
	expect(t, r, 200, "complete")
	if r.header.Get("ETag") != `"1"` {
		t.Errorf("ETag %s", r.header.Get("ETag"))
	}
	var inst struct {
		Status string
		State  struct {
			Steps map[string]struct {
				Status string
				Output json.RawMessage
			}
		}
	}
	r.json(t, &inst)
	if st := inst.State.Steps["approve"]; st.Status != "COMPLETED" || string(st.Output) != `{"ok":true}` || inst.Status != "PENDING" {
		t.Errorf("after completion: %s", r.body)
	}
	expect(t, a.do("POST", path, `{"output":2}`, "If-Match", `"1"`), 409, "completed twice")
	a.do("POST", "/v1/workflows/cs-1/cancel", "")
	a.create("cs-2", `{"steps":{"x":{}}}`)
	a.do("POST", "/v1/workflows/cs-2/cancel", "")
	expect(t, a.do("POST", "/v1/workflows/cs-2/steps/x/complete", `{}`, "If-Match", `"0"`), 409, "terminal instance before 412")

	// If-Match: * takes the locking path, with the same order of errors.
	a.create("cs-3", `{"steps":{"w":{"status":"WAITING"},"done":{"status":"COMPLETED"}}}`)
	expect(t, a.do("POST", "/v1/workflows/nope/steps/w/complete", `{"output":1}`, "If-Match", `*`), 404, "unknown workflow, *")
	expect(t, a.do("POST", "/v1/workflows/cs-3/steps/nope/complete", `{"output":1}`, "If-Match", `*`), 404, "unknown step, *")
	expect(t, a.do("POST", "/v1/workflows/cs-3/steps/done/complete", `{"output":1}`, "If-Match", `*`), 409, "completed step, *")
	expect(t, a.do("POST", "/v1/workflows/cs-3/steps/w/complete", `{"outpt":1}`, "If-Match", `*`), 400, "unknown field, *")
	r = a.do("POST", "/v1/workflows/cs-3/steps/w/complete", `{"output":7}`, "If-Match", `*`)
	expect(t, r, 200, "complete, *")
	if r.header.Get("ETag") != `"1"` || stepStatuses(t, r)["w"] != "COMPLETED" {
		t.Errorf("after completion with *: %s %s", r.header.Get("ETag"), r.body)
	}
	expect(t, a.do("POST", "/v1/workflows/cs-3/steps/w/complete", `{"output":8}`, "If-Match", `*`), 409, "completed twice, *")
	expect(t, a.do("POST", "/v1/workflows/cs-3/cancel", ""), 200, "cancel cs-3")
	expect(t, a.do("POST", "/v1/workflows/cs-3/steps/nope/complete", `{"output":1}`, "If-Match", `*`), 404, "unknown step of a terminal instance, *: 404 before 409")
	expect(t, a.do("POST", "/v1/workflows/cs-2/steps/x/complete", `{}`, "If-Match", `*`), 409, "terminal instance, *")
}

func testBatch(t *testing.T, a *api) {
	var ids []string
	for i := range 3 {
		id := fmt.Sprintf("batch-%d", i)
		a.create(id, "")
		a.do("POST", "/v1/workflows/"+id+"/status", `{"from":"PENDING","to":"RUNNING"}`)
		ids = append(ids, id)
	}
	before := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	r := a.do("POST", "/v1/batch/status", fmt.Sprintf(`{"status":"RUNNING","updated_before":%q,"new_status":"PAUSED","limit":2}`, before))
	expect(t, r, 200, "batch")
	var out httpapi.BatchStatusResponse
	r.json(t, &out)
	if len(out.IDs) != 2 {
		t.Errorf("batch moved %v, want 2", out.IDs)
	}
	// Other subtests' RUNNING instances are older, so check what moved, not which.
	for _, id := range out.IDs {
		if st := a.do("GET", "/v1/workflows/"+id, "").instance(t)["status"]; st != "PAUSED" {
			t.Errorf("batch returned %s but it is %v", id, st)
		}
	}
	r = a.do("POST", "/v1/batch/status", fmt.Sprintf(`{"status":"RUNNING","updated_before":%q,"new_status":"PAUSED","limit":10000}`, before))
	expect(t, r, 200, "batch of the rest")
	for _, id := range ids {
		if st := a.do("GET", "/v1/workflows/"+id, "").instance(t)["status"]; st != "PAUSED" {
			t.Errorf("%s is %v after batches over every RUNNING instance", id, st)
		}
	}
	for _, body := range []string{
		`{"status":"RUNNING","updated_before":"yesterday","new_status":"PAUSED","limit":2}`,
		`{"status":"RUNNING","updated_before":"` + before + `","new_status":"PAUSED","limit":0}`,
		`{"status":"RUNNING","updated_before":"` + before + `","new_status":"PAUSED","limit":10001}`,
		`{"status":"RUNNING","updated_before":"` + before + `","new_status":"DONE","limit":2}`,
		`{"status":"RUNNING","updated_before":"` + before + `","new_status":"PAUSED","limit":2,"x":1}`,
		`{"status":"RUNNING","updated_before":"` + before + `","new_status":"PAUSED"}`,
	} {
		expect(t, a.do("POST", "/v1/batch/status", body), 400, "batch "+body)
	}
	expect(t, a.do("POST", "/v1/batch/status", `{"status":"COMPLETED","updated_before":"`+before+`","new_status":"RUNNING","limit":2}`), 422, "batch transition outside the table")
	// RFC 3339 allows lowercase "t" and "z", and offsets.
	lower := strings.ToLower(before)
	offset := time.Now().Add(time.Hour).In(time.FixedZone("", 2*3600)).Format(time.RFC3339)
	for _, ts := range []string{lower, offset} {
		expect(t, a.do("POST", "/v1/batch/status", `{"status":"COMPLETED","updated_before":"`+ts+`","new_status":"CANCELLED","limit":2}`), 422, "422, not 400: the time "+ts+" is accepted")
	}
}

func testHistory(t *testing.T, a *api) {
	a.create("hist-1", "")
	a.do("PATCH", "/v1/workflows/hist-1", `{"variables":{"n":1}}`, "If-Match", `"0"`)
	a.do("POST", "/v1/workflows/hist-1/status", `{"from":"PENDING","to":"RUNNING"}`)
	r := a.do("GET", "/v1/workflows/hist-1/history", "")
	expect(t, r, 200, "history")
	var h struct {
		Versions []struct {
			Version int
			Status  string
			State   map[string]any
			At      time.Time
			Cause   string
		}
	}
	r.json(t, &h)
	if len(h.Versions) != 3 {
		t.Fatalf("history %s", r.body)
	}
	for i, v := range h.Versions {
		if v.Version != i || v.At.IsZero() || v.Cause == "" {
			t.Errorf("history[%d] = %+v", i, v)
		}
	}
	if h.Versions[2].Status != "RUNNING" || h.Versions[1].State["variables"].(map[string]any)["n"] != 1.0 {
		t.Errorf("history content %s", r.body)
	}
	expect(t, a.do("GET", "/v1/workflows/nope/history", ""), 404, "unknown id")
}

func testLimits(t *testing.T, a *api) {
	big := `{"state":{"variables":{"x":"` + strings.Repeat("a", httpapi.MaxBodyBytes) + `"}}}`
	expect(t, a.do("POST", "/v1/workflows", big), 413, "body over 1 MiB")
	a.create("lim-1", "")
	expect(t, a.do("PATCH", "/v1/workflows/lim-1", `{"x":"`+strings.Repeat("a", httpapi.MaxBodyBytes)+`"}`, "If-Match", `"0"`), 413, "patch over 1 MiB")
	r := a.do("GET", "/v1/workflows/lim-1", "", "X-Request-Id", "abc-123")
	if r.header.Get("X-Request-Id") != "abc-123" {
		t.Errorf("X-Request-Id not echoed: %q", r.header.Get("X-Request-Id"))
	}
	if r = a.do("GET", "/v1/workflows/lim-1", ""); len(r.header.Get("X-Request-Id")) < 8 {
		t.Errorf("no generated X-Request-Id")
	}
}

// testBrowsers: pages of other sites can neither act on the server nor read
// it through DNS rebinding.
func testBrowsers(t *testing.T, a *api) {
	self := strings.TrimPrefix(a.url, "http://")
	_, port, _ := strings.Cut(self, ":")
	for _, path := range []string{"/", "/v1/workflows", "/healthz"} {
		expect(t, a.do("GET", path, "", "Host", "evil.example:"+port), 421, "GET "+path+" with a foreign Host")
	}
	expect(t, a.do("GET", "/v1/workflows", "", "Host", "localhost:"+port), 200, "Host localhost")
	// What a form or fetch(no-cors) of another site sends.
	expect(t, a.do("POST", "/v1/workflows", `{"id":"xsite-1"}`, "Content-Type", "text/plain;charset=UTF-8", "Origin", "https://evil.example"), 403, "cross-site text/plain POST")
	expect(t, a.do("POST", "/v1/workflows", `{"id":"xsite-1"}`, "Content-Type", "text/plain;charset=UTF-8"), 415, "text/plain POST")
	expect(t, a.do("POST", "/v1/workflows", `{"id":"xsite-1"}`, "Origin", "null"), 403, "Origin null")
	expect(t, a.do("GET", "/v1/workflows/xsite-1", ""), 404, "the refused creates created nothing")
	expect(t, a.do("POST", "/v1/workflows", `{"id":"xsite-1"}`, "Origin", "http://"+self), 201, "same-origin POST")
	expect(t, a.do("POST", "/v1/workflows/xsite-1/cancel", "", "Origin", "http://evil.example"), 403, "cross-site cancel")
	expect(t, a.do("POST", "/v1/workflows/xsite-1/cancel", "", "Origin", "http://"+self), 200, "same-origin cancel")
}

func testHealth(t *testing.T, a *api) {
	expect(t, a.do("GET", "/healthz", ""), 200, "healthz")
	r := a.do("GET", "/metrics", "")
	expect(t, r, 200, "metrics")
}

// testConcurrentPatch: 32 clients each GET, then PATCH with If-Match, retrying
// on 412. Every successful PATCH incremented the counter exactly once, so the
// counter, the version and the number of 200s must all agree.
func testConcurrentPatch(t *testing.T, a *api) {
	a.create("race-1", `{"variables":{"counter":0}}`)
	// Sixteen clients read-modify-write one counter at once: most PATCHes
	// find the version moved (hundreds of 412s a run), which is what the
	// check needs; with 32 the 412s, and the run time, grew quadratically.
	const clients, perClient = 16, 5
	var ok, stale atomic.Int64
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for done := 0; done < perClient; {
				r := a.getRaw("/v1/workflows/race-1")
				var inst struct {
					Version int64
					State   struct{ Variables struct{ Counter int64 } }
				}
				if err := json.Unmarshal(r.body, &inst); err != nil {
					t.Error(err)
					return
				}
				body := fmt.Sprintf(`{"variables":{"counter":%d}}`, inst.State.Variables.Counter+1)
				p := a.patchRaw("/v1/workflows/race-1", body, r.header.Get("ETag"))
				switch p.status {
				case 200:
					ok.Add(1)
					done++
				case 412:
					stale.Add(1)
				default:
					t.Errorf("PATCH: %d %s", p.status, p.body)
					return
				}
			}
		}()
	}
	wg.Wait()
	r := a.do("GET", "/v1/workflows/race-1", "")
	var inst struct {
		Version int64
		State   struct{ Variables struct{ Counter int64 } }
	}
	r.json(t, &inst)
	if inst.State.Variables.Counter != ok.Load() || inst.Version != ok.Load() || ok.Load() != clients*perClient {
		t.Errorf("counter %d, version %d, successful PATCHes %d (412s: %d)", inst.State.Variables.Counter, inst.Version, ok.Load(), stale.Load())
	}
	if etag := r.header.Get("ETag"); etag != `"`+strconv.FormatInt(inst.Version, 10)+`"` {
		t.Errorf("ETag %s for version %d", etag, inst.Version)
	}
	t.Logf("%d successful PATCHes, %d answered 412", ok.Load(), stale.Load())
}

// getRaw and patchRaw are safe from many goroutines: they report instead of
// calling t.Fatal.
func (a *api) getRaw(path string) resp {
	req, _ := http.NewRequest("GET", a.url+path, nil)
	return a.send(req)
}

func (a *api) patchRaw(path, body, etag string) resp {
	req, _ := http.NewRequest("PATCH", a.url+path, strings.NewReader(body))
	req.Header.Set("If-Match", etag)
	req.Header.Set("Content-Type", "application/merge-patch+json")
	return a.send(req)
}

func (a *api) send(req *http.Request) resp {
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Error(err)
		return resp{}
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{status: res.StatusCode, header: res.Header, body: b}
}

func testAuth(t *testing.T, newServer NewServer) {
	a := &api{t: t, url: newServer(t, "s3cret", "other-token"), token: "s3cret"}
	expect(t, a.do("GET", "/v1/workflows", ""), 200, "valid token")
	a.token = "other-token"
	expect(t, a.do("GET", "/v1/workflows", ""), 200, "second token")
	for _, tok := range []string{"", "s3cre", "s3cret2", "S3CRET"} {
		a.token = tok
		r := a.do("GET", "/v1/workflows", "")
		expect(t, r, 401, "token "+tok)
		if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("401 without WWW-Authenticate: Bearer")
		}
	}
	a.token = ""
	expect(t, a.do("POST", "/v1/workflows", `{}`, "Authorization", "Basic czNjcmV0"), 401, "basic auth")
	expect(t, a.do("POST", "/v1/events", `{"name":"tick"}`), 401, "publishing an event without a token")
	expect(t, a.do("GET", "/healthz", ""), 200, "healthz needs no token")
}

// testDefinitionAndTaskRoutes checks the status codes of the definitions and
// tasks routes. The server must run no in-process handler
// named "remote" or "nobody".
func testDefinitionAndTaskRoutes(t *testing.T, newServer NewServer) {
	a := &api{t: t, url: newServer(t)}
	def := `{"name": "one", "steps": [{"id": "a", "type": "task", "handler": "remote", "retry": {"max_attempts": 2, "initial_backoff": "10ms"}}, {"id": "w", "type": "wait", "depends_on": ["a"]}]}`
	r := a.do("PUT", "/v1/definitions/one", def)
	expect(t, r, 201, "new definition")
	if !bytes.Contains(r.body, []byte(`"revision":1`)) {
		t.Errorf("PUT body %s", r.body)
	}
	expect(t, a.do("PUT", "/v1/definitions/one", def), 200, "same definition again")
	r = a.do("PUT", "/v1/definitions/other", strings.Replace(def, `"max_attempts": 2`, `"max_attempts": 3`, 1))
	expect(t, r, 400, "name differs from the path")
	if !bytes.Contains(r.body, []byte(`the definition is named \"one\" but was PUT to /v1/definitions/other`)) {
		t.Errorf("PUT to another name: %s", r.body)
	}
	// The name is one problem among the others, listed with them.
	r = a.do("PUT", "/v1/definitions/other", `{"name": "one", "steps": [{"id": "a", "type": "nope"}]}`)
	expect(t, r, 400, "name differs and a step is invalid")
	var named httpapi.ErrorBody
	r.json(t, &named)
	if len(named.Problems) != 2 || !strings.Contains(strings.Join(named.Problems, "\n"), `but was PUT to /v1/definitions/other`) {
		t.Errorf("PUT to another name with another problem: want both listed, got %q", named.Problems)
	}
	// Refused means not stored, under either name.
	expect(t, a.do("GET", "/v1/definitions/other", ""), 404, "the refused definition's path")
	expect(t, a.do("GET", "/v1/definitions/one?revision=2", ""), 404, "a revision stored by a refused PUT")
	r = a.do("PUT", "/v1/definitions/bad", "name: bad\nsteps:\n  - {id: a, type: task}\n  - {id: a, type: nope, depends_on: [zz]}\n")
	expect(t, r, 400, "invalid definition")
	var e httpapi.ErrorBody
	r.json(t, &e)
	if len(e.Problems) < 3 {
		t.Errorf("every problem should be listed: %s", r.body)
	}
	// Template problems: one bad reference hides neither the next one in the
	// same string, nor those of another field or step, nor a bad dependency.
	r = a.do("PUT", "/v1/definitions/tpl", `name: tpl
steps:
  - {id: a, type: task, handler: h, input: {x: "{{ .steps.zz.output }} {{ .steps.b.output }}", y: "{{ .foo }}"}}
  - {id: b, type: http, depends_on: [nope], request: {method: GET, url: "http://h/{{ .steps.b.output }}", body: ["{{ .input..k }}"]}}
`)
	expect(t, r, 400, "invalid templates")
	e = httpapi.ErrorBody{}
	r.json(t, &e)
	wantProblems := []string{
		`steps[0] (a): input.x: invalid reference "{{ .steps.zz.output }}": unknown step "zz"`,
		`steps[0] (a): input.x: {{ .steps.b.output }}: step "b" is not an ancestor of "a" (add it to depends_on, directly or through another step)`,
		`steps[0] (a): input.y: invalid reference "{{ .foo }}": unknown root ".foo" (want .input or .steps.STEP.output)`,
		`steps[1] (b): depends_on[0]: unknown step "nope"`,
		`steps[1] (b): request.url: {{ .steps.b.output }}: a step cannot use its own output`,
		`steps[1] (b): request.body[0]: invalid reference "{{ .input..k }}": empty key (two dots in a row or a trailing dot)`,
	}
	if strings.Join(e.Problems, "\n") != strings.Join(wantProblems, "\n") {
		t.Errorf("problems of invalid templates:\n%s\nwant:\n%s", strings.Join(e.Problems, "\n"), strings.Join(wantProblems, "\n"))
	}
	expect(t, a.do("GET", "/v1/definitions/tpl", ""), 404, "a definition refused for its templates")
	expect(t, a.do("GET", "/v1/definitions/one", ""), 200, "get definition")
	expect(t, a.do("GET", "/v1/definitions/one?revision=9", ""), 404, "unknown revision")
	expect(t, a.do("GET", "/v1/definitions/one?revision=x", ""), 400, "bad revision")
	expect(t, a.do("GET", "/v1/definitions/nope", ""), 404, "unknown definition")
	expect(t, a.do("GET", "/v1/definitions", ""), 200, "list definitions")
	r = a.do("POST", "/v1/workflows", `{"definition":"one","state":{"steps":{"a":{"status":"COMPLETED"}}}}`)
	expect(t, r, 400, "state.steps with a definition")
	if !bytes.Contains(r.body, []byte(`state.steps`)) {
		t.Errorf("state.steps with a definition: %s", r.body)
	}

	r = a.do("POST", "/v1/workflows", `{"id":"t-1","definition":"one","input":{"x":1}}`)
	expect(t, r, 201, "start")
	if r.instance(t)["status"] != "RUNNING" {
		t.Errorf("started instance: %s", r.body)
	}
	expect(t, a.do("POST", "/v1/workflows/t-1/steps/w/complete", `{}`, "If-Match", `"0"`), 409, "a PENDING step")
	expect(t, a.do("POST", "/v1/tasks/poll", `{"worker":"w1","handlers":[]}`), 400, "no handlers")
	expect(t, a.do("POST", "/v1/tasks/poll", `{"worker":"w1","handlers":["flowd:sleep"]}`), 400, "an engine queue")
	expect(t, a.do("POST", "/v1/tasks/poll", `{"worker":"w1","handlers":["x"],"wait_seconds":61}`), 400, "wait too long")
	r = a.do("POST", "/v1/tasks/poll", `{"worker":"w1","handlers":["x"],"wait_seconds":1e300}`)
	expect(t, r, 400, "a wait that overflows a duration")
	if !bytes.Contains(r.body, []byte("wait_seconds must be from 0 to 60")) {
		t.Errorf("huge wait_seconds: %s", r.body)
	}
	expect(t, a.do("POST", "/v1/tasks/poll", `{"worker":"w1","handlers":["x"],"lease_seconds":1e300}`), 400, "a lease that overflows a duration")
	expect(t, a.do("POST", "/v1/tasks/poll", `{"worker":"w1","handlers":["x"],"wait":1}`), 400, "unknown field")
	if r := a.do("POST", "/v1/tasks/poll", `{"worker":"w1","handlers":["nobody"]}`); r.status != 204 || len(r.body) != 0 {
		t.Errorf("poll with nothing to do: %d %s", r.status, r.body)
	}
	r = a.do("POST", "/v1/tasks/poll", `{"worker":"w1","handlers":["remote"],"lease_seconds":1}`)
	expect(t, r, 200, "poll")
	var task httpapi.TaskResponse
	r.json(t, &task)
	if task.TaskID == "" || task.Lease == "" || task.WorkflowID != "t-1" || task.Step != "a" || task.Attempt != 1 || string(task.Input) != "null" {
		t.Errorf("task %s", r.body)
	}
	path := "/v1/tasks/" + task.TaskID
	expect(t, a.do("POST", path+"/complete", `{"output":1}`), 400, "no lease")
	expect(t, a.do("POST", path+"/complete", `{"lease":"nope"}`), 409, "wrong lease")
	expect(t, a.do("POST", "/v1/tasks/no-such/complete", `{"lease":"x"}`), 404, "unknown task")
	expect(t, a.do("POST", path+"/heartbeat", `{"lease":"`+task.Lease+`","lease_seconds":-1}`), 400, "negative lease")
	expect(t, a.do("POST", path+"/heartbeat", `{"lease":"`+task.Lease+`","lease_seconds":1e300}`), 400, "a lease that overflows a duration")
	r = a.do("POST", path+"/heartbeat", `{"lease":"`+task.Lease+`","lease_seconds":30}`)
	expect(t, r, 200, "heartbeat")
	if !bytes.Contains(r.body, []byte(`"lease_until"`)) {
		t.Errorf("heartbeat body %s", r.body)
	}
	expect(t, a.do("POST", path+"/fail", `{"lease":"`+task.Lease+`","error":"boom","retryable":true}`), 200, "fail, retried")
	expect(t, a.do("POST", path+"/complete", `{"lease":"`+task.Lease+`"}`), 409, "the failed attempt's lease")
	var second httpapi.TaskResponse
	for deadline := time.Now().Add(5 * time.Second); second.TaskID == ""; {
		if time.Now().After(deadline) {
			t.Fatal("the failed attempt was not re-queued")
		}
		if r := a.do("POST", "/v1/tasks/poll", `{"worker":"w2","handlers":["remote"],"wait_seconds":1}`); r.status == 200 {
			r.json(t, &second)
		}
	}
	if second.Attempt != 2 {
		t.Errorf("second delivery: %+v", second)
	}
	expect(t, a.do("POST", "/v1/tasks/"+second.TaskID+"/complete", `{"lease":"`+second.Lease+`","output":{"ok":true}}`), 200, "complete")
	r = a.do("GET", "/v1/workflows/t-1", "")
	inst := r.instance(t)
	steps := inst["state"].(map[string]any)["steps"].(map[string]any)
	if steps["a"].(map[string]any)["status"] != "COMPLETED" || steps["w"].(map[string]any)["status"] != "WAITING" {
		t.Errorf("after completion: %s", r.body)
	}
	expect(t, a.do("POST", "/v1/workflows/t-1/steps/w/complete", `{"output":"yes"}`, "If-Match", r.header.Get("ETag")), 200, "complete the wait step")
	if st := a.do("GET", "/v1/workflows/t-1", "").instance(t)["status"]; st != "COMPLETED" {
		t.Errorf("workflow is %v after its last step", st)
	}

	// /status moves a definition-based instance as the actions do: PAUSED →
	// RUNNING schedules what became ready while paused, and an instance
	// whose last step finished while paused completes when resumed.
	expect(t, a.do("PUT", "/v1/definitions/two", `{"name": "two", "steps": [{"id": "a", "type": "wait"}, {"id": "b", "type": "wait", "depends_on": ["a"]}]}`), 201, "two wait steps")
	expect(t, a.do("POST", "/v1/workflows", `{"id":"s-1","definition":"two"}`), 201, "start two")
	expect(t, a.do("POST", "/v1/workflows/s-1/status", `{"from":"RUNNING","to":"PAUSED"}`), 200, "pause by /status")
	expect(t, a.do("POST", "/v1/workflows/s-1/steps/a/complete", `{}`, "If-Match", "*"), 200, "complete a while paused")
	r = a.do("POST", "/v1/workflows/s-1/status", `{"from":"PAUSED","to":"RUNNING"}`)
	expect(t, r, 200, "resume by /status")
	inst = r.instance(t)
	if b := inst["state"].(map[string]any)["steps"].(map[string]any)["b"].(map[string]any)["status"]; inst["status"] != "RUNNING" || b != "WAITING" {
		t.Errorf("after /status PAUSED → RUNNING: %s; want RUNNING with b WAITING", r.body)
	}
	expect(t, a.do("POST", "/v1/workflows/s-1/status", `{"from":"PAUSED","to":"RUNNING"}`), 409, "not PAUSED any more")
	expect(t, a.do("POST", "/v1/workflows/s-1/pause", ``), 200, "pause")
	r = a.do("POST", "/v1/workflows/s-1/steps/b/complete", `{}`, "If-Match", "*")
	expect(t, r, 200, "complete the last step while paused")
	if st := r.instance(t)["status"]; st != "PAUSED" {
		t.Errorf("the last step completed while paused: workflow %v, want PAUSED", st)
	}
	// A start with a state: its variables and other keys, the definition's steps.
	r = a.do("POST", "/v1/workflows", `{"id":"sv-1","definition":"two","state":{"variables":{"k":1},"note":"x"}}`)
	expect(t, r, 201, "start with variables")
	if st := r.instance(t)["state"].(map[string]any); fmt.Sprint(st["variables"]) != "map[k:1]" || st["note"] != "x" || len(st["steps"].(map[string]any)) != 2 {
		t.Errorf("started with a state: %s", r.body)
	}
	r = a.do("POST", "/v1/workflows/s-1/resume", ``)
	expect(t, r, 200, "resume an instance with nothing left to run")
	if inst := r.instance(t); inst["status"] != "COMPLETED" || r.header.Get("ETag") != fmt.Sprintf(`"%v"`, inst["version"]) {
		t.Errorf("resumed with every step done: %s, ETag %s; want COMPLETED", r.body, r.header.Get("ETag"))
	}
}

// stepStatuses returns the status of each step of the instance in r.
func stepStatuses(t *testing.T, r resp) map[string]string {
	t.Helper()
	var inst struct {
		State struct {
			Steps map[string]struct{ Status string }
		}
	}
	r.json(t, &inst)
	out := map[string]string{}
	for id, st := range inst.State.Steps {
		out[id] = st.Status
	}
	return out
}

// A PATCH of a definition-based instance may change everything in state but
// state.steps: any patch with a steps key is a 409 that points to the step
// complete route, decided with the terminal-instance 409 (after 428, 400,
// 415 and 404, before 412), whatever If-Match says.
func testEngineOwnsSteps(t *testing.T, newServer NewServer) {
	a := &api{t: t, url: newServer(t)}
	expect(t, a.do("PUT", "/v1/definitions/owned", `{"name": "owned", "steps": [{"id": "a", "type": "wait"}, {"id": "b", "type": "wait", "depends_on": ["a"]}]}`), 201, "definition")
	expect(t, a.do("POST", "/v1/workflows", `{"id":"own-1","definition":"owned"}`), 201, "start")
	before := a.do("GET", "/v1/workflows/own-1", "")
	for _, body := range []string{
		`{"steps":null}`,
		`{"steps":{}}`,
		`{"steps":{"a":{"status":"COMPLETED","output":{"forged":true}}}}`,
		`{"variables":{"x":1},"steps":{"b":null}}`,
	} {
		for _, tag := range []string{`"0"`, `*`, `"7", "0"`, `"9"`} {
			r := a.do("PATCH", "/v1/workflows/own-1", body, "If-Match", tag)
			expect(t, r, 409, "patching steps "+body+" with If-Match "+tag)
			if !bytes.Contains(r.body, []byte("owned by the engine")) || !bytes.Contains(r.body, []byte("POST /v1/workflows/own-1/steps/{step}/complete")) {
				t.Errorf("the 409 should say the engine owns the steps and how to complete one: %s", r.body)
			}
		}
	}
	if after := a.do("GET", "/v1/workflows/own-1", ""); !bytes.Equal(after.body, before.body) {
		t.Errorf("refused patches changed the instance:\n%s\n%s", before.body, after.body)
	}
	// The order of errors around it.
	expect(t, a.do("PATCH", "/v1/workflows/own-1", `{"steps":{}}`), 428, "428 before 409")
	expect(t, a.do("PATCH", "/v1/workflows/own-1", `{"steps":{"a,b":{}}}`, "If-Match", `"0"`), 400, "400 before 409")
	expect(t, a.do("PATCH", "/v1/workflows/own-1", `{"steps":{}}`, "If-Match", `"0"`, "Content-Type", "text/plain"), 415, "415 before 409")
	expect(t, a.do("PATCH", "/v1/workflows/nope", `{"steps":{}}`, "If-Match", `"0"`), 404, "404 before 409")
	// Everything else in state may change.
	r := a.do("PATCH", "/v1/workflows/own-1", `{"variables":{"x":1},"note":"checked"}`, "If-Match", `"0"`)
	expect(t, r, 200, "patching variables and other keys")
	if got := stepStatuses(t, r); got["a"] != "WAITING" || got["b"] != "PENDING" {
		t.Errorf("a patch without steps changed them: %v", got)
	}
	expect(t, a.do("POST", "/v1/workflows/own-1/steps/a/complete", `{"output":1}`, "If-Match", `"1"`), 200, "the complete route")
	// A terminal definition-based instance: 409 as well.
	expect(t, a.do("POST", "/v1/workflows/own-1/cancel", ""), 200, "cancel")
	expect(t, a.do("PATCH", "/v1/workflows/own-1", `{"steps":{}}`, "If-Match", `"1"`), 409, "terminal and steps, stale tag")
	// Free-form instances keep owning their steps.
	a.create("free-1", `{"steps":{"s":{"status":"WAITING"}}}`)
	r = a.do("PATCH", "/v1/workflows/free-1", `{"steps":{"s":{"status":"COMPLETED","output":2}}}`, "If-Match", `"0"`)
	expect(t, r, 200, "patching a free-form instance's steps")
	if got := stepStatuses(t, r); got["s"] != "COMPLETED" {
		t.Errorf("free-form steps after patch: %v", got)
	}
}

// Whatever stops an instance through the API (cancel, /status, batch) turns
// its RUNNING and WAITING steps CANCELLED in that same version; a retry
// runs them again. Free-form instances follow the same rule.
func testStopCancelsSteps(t *testing.T, newServer NewServer) {
	a := &api{t: t, url: newServer(t)}
	expect(t, a.do("PUT", "/v1/definitions/stop", `{"name": "stop", "steps": [{"id": "a", "type": "task", "handler": "nobody-polls"}, {"id": "w", "type": "wait"}, {"id": "c", "type": "task", "handler": "nobody-polls", "depends_on": ["a"]}]}`), 201, "definition")
	stopped := func(what, id, status string) {
		t.Helper()
		r := a.do("GET", "/v1/workflows/"+id, "")
		expect(t, r, 200, what)
		if got := r.instance(t)["status"]; got != status {
			t.Errorf("%s: status %v, want %s", what, got, status)
		}
		if got := stepStatuses(t, r); got["a"] != "CANCELLED" || got["w"] != "CANCELLED" || got["c"] != "PENDING" {
			t.Errorf("%s: steps %v, want a and w CANCELLED, c PENDING", what, got)
		}
		var h struct {
			Versions []struct {
				Version int
				Status  string
				State   struct {
					Steps map[string]struct{ Status string }
				}
			}
		}
		a.do("GET", "/v1/workflows/"+id+"/history", "").json(t, &h)
		last := h.Versions[len(h.Versions)-1]
		if last.Version != len(h.Versions)-1 || last.Status != status || last.State.Steps["a"].Status != "CANCELLED" || last.State.Steps["w"].Status != "CANCELLED" {
			t.Errorf("%s: the last history row %+v should be the stop, with the steps cancelled", what, last)
		}
	}
	start := func(id string) {
		t.Helper()
		expect(t, a.do("POST", "/v1/workflows", fmt.Sprintf(`{"id":%q,"definition":"stop"}`, id)), 201, "start "+id)
	}
	start("cancel-1")
	expect(t, a.do("POST", "/v1/workflows/cancel-1/cancel", ""), 200, "cancel")
	stopped("cancel action", "cancel-1", "CANCELLED")
	for _, to := range []string{"CANCELLED", "FAILED", "TIMED_OUT"} {
		id := "status-" + to
		start(id)
		r := a.do("POST", "/v1/workflows/"+id+"/status", fmt.Sprintf(`{"from":"RUNNING","to":%q}`, to))
		expect(t, r, 200, "/status RUNNING → "+to)
		if got := stepStatuses(t, r); got["a"] != "CANCELLED" || got["w"] != "CANCELLED" {
			t.Errorf("/status RUNNING → %s answered steps %v", to, got)
		}
		stopped("/status RUNNING → "+to, id, to)
	}
	// Every instance so far is stopped: the batch moves these two only.
	start("batch-1")
	start("batch-2")
	r := a.do("POST", "/v1/batch/status", fmt.Sprintf(`{"status":"RUNNING","updated_before":%q,"new_status":"TIMED_OUT","limit":10}`, time.Now().Add(time.Hour).UTC().Format(time.RFC3339)))
	expect(t, r, 200, "batch")
	stopped("batch RUNNING → TIMED_OUT", "batch-1", "TIMED_OUT")
	stopped("batch RUNNING → TIMED_OUT", "batch-2", "TIMED_OUT")
	for _, id := range []string{"status-FAILED", "batch-1"} {
		r = a.do("POST", "/v1/workflows/"+id+"/retry", "")
		expect(t, r, 200, "retry "+id)
		if got := stepStatuses(t, r); got["a"] != "RUNNING" || got["w"] != "WAITING" || got["c"] != "PENDING" {
			t.Errorf("retry of %s: steps %v, want a RUNNING, w WAITING, c PENDING", id, got)
		}
	}
	// A batch back to RUNNING retries as the action does.
	r = a.do("POST", "/v1/batch/status", fmt.Sprintf(`{"status":"TIMED_OUT","updated_before":%q,"new_status":"RUNNING","limit":10}`, time.Now().Add(time.Hour).UTC().Format(time.RFC3339)))
	expect(t, r, 200, "batch TIMED_OUT → RUNNING")
	for _, id := range []string{"status-TIMED_OUT", "batch-2"} {
		if got := stepStatuses(t, a.do("GET", "/v1/workflows/"+id, "")); got["a"] != "RUNNING" || got["w"] != "WAITING" || got["c"] != "PENDING" {
			t.Errorf("batch retry of %s: steps %v, want a RUNNING, w WAITING, c PENDING", id, got)
		}
	}

	// Free-form: a terminal status change through the API cancels the
	// steps it shows running or waiting too.
	for _, to := range []string{"CANCELLED", "COMPLETED", "FAILED"} {
		id := "free-" + to
		a.create(id, `{"steps":{"a":{"status":"RUNNING"},"w":{"status":"WAITING"},"c":{}}}`)
		expect(t, a.do("POST", "/v1/workflows/"+id+"/status", `{"from":"PENDING","to":"RUNNING"}`), 200, "run "+id)
		expect(t, a.do("POST", "/v1/workflows/"+id+"/status", fmt.Sprintf(`{"from":"RUNNING","to":%q}`, to)), 200, "stop "+id)
		stopped("free-form RUNNING → "+to, id, to)
	}
	a.create("free-paused", `{"steps":{"a":{"status":"RUNNING"},"w":{"status":"WAITING"},"c":{}}}`)
	expect(t, a.do("POST", "/v1/workflows/free-paused/status", `{"from":"PENDING","to":"RUNNING"}`), 200, "run")
	r = a.do("POST", "/v1/workflows/free-paused/pause", "")
	expect(t, r, 200, "pause")
	if got := stepStatuses(t, r); got["a"] != "RUNNING" || got["w"] != "WAITING" {
		t.Errorf("a pause leaves steps alone: %v", got)
	}
}
