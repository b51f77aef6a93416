package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/flowd/flowd/httpapi"
	"github.com/flowd/flowd/store"
)

// The routes of code workflows (SPEC section 18) over HTTP, on both stores:
// code definitions, the run task a poll delivers, checkpoints, suspends on
// sleeps and events, non-determinism and the run's completion. Every
// exchange is also checked against openapi.yaml.
func TestCodeWorkflowRoutes(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			c := codeServer(t, b.open, nil)
			t.Run("Definitions", func(t *testing.T) { testCodeDefinitions(t, c) })
			t.Run("Runs", func(t *testing.T) { testCodeRuns(t, c) })
			t.Run("EventWait", func(t *testing.T) { testCodeEventWait(t, c) })
			t.Run("NonDeterminism", func(t *testing.T) { testCodeNonDeterminism(t, c) })
		})
	}
}

// codeClient is a server under test and a raw HTTP client for it.
type codeClient struct {
	t     *testing.T
	url   string
	token string
}

// codeServer starts the API on a fresh, migrated store (with the token file
// lines given) behind a real HTTP listener.
func codeServer(t *testing.T, open func(*testing.T) store.Backend, tokens []string) *codeClient {
	t.Helper()
	st := open(t)
	t.Cleanup(func() { st.Close() })
	if _, err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	var toks []httpapi.Token
	if len(tokens) > 0 {
		var err error
		if toks, err = httpapi.ParseTokens(strings.Join(tokens, "\n")); err != nil {
			t.Fatal(err)
		}
	}
	h, err := httpapi.NewServer(httpapi.Config{Store: st, Tokens: toks})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(validatingHandler(t, h, nil))
	t.Cleanup(srv.Close)
	return &codeClient{t: t, url: srv.URL}
}

// as is the same server with another bearer token.
func (c *codeClient) as(token string) *codeClient {
	return &codeClient{t: c.t, url: c.url, token: token}
}

type codeReply struct {
	status int
	header http.Header
	body   []byte
}

func (c *codeClient) do(method, path, body string) codeReply {
	c.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.url+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return codeReply{status: res.StatusCode, header: res.Header, body: b}
}

// want checks the status and, for an error, that its JSON body (message
// and problems) says each of says.
func (r codeReply) want(t *testing.T, status int, what string, says ...string) {
	t.Helper()
	if r.status != status {
		t.Errorf("%s: %d %s, want %d", what, r.status, r.body, status)
		return
	}
	if status < 400 {
		return
	}
	var e httpapi.ErrorBody
	if err := json.Unmarshal(r.body, &e); err != nil || e.Error != http.StatusText(status) {
		t.Errorf("%s: %d %s is not the JSON error body", what, r.status, r.body)
		return
	}
	text := strings.Join(append([]string{e.Message}, e.Problems...), "\n")
	for _, s := range says {
		if !strings.Contains(text, s) {
			t.Errorf("%s: %d %q, want it to say %q", what, r.status, text, s)
		}
	}
}

func (r codeReply) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decoding %s: %v", r.body, err)
	}
}

// sameJSON reports whether got and want are the same JSON value.
func sameJSON(t *testing.T, got json.RawMessage, want string) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Errorf("%s is not JSON: %v", got, err)
		return false
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want %s is not JSON: %v", want, err)
	}
	return reflect.DeepEqual(g, w)
}

// codeInstance is what GET /v1/workflows/{id} says of a code workflow.
type codeInstance struct {
	Status  string          `json:"status"`
	Version int64           `json:"version"`
	Output  json.RawMessage `json:"output"`
	State   struct {
		Steps map[string]json.RawMessage `json:"steps"`
		Code  json.RawMessage            `json:"code"`
	} `json:"state"`
	etag string
}

func (c *codeClient) instance(id string) codeInstance {
	c.t.Helper()
	r := c.do("GET", "/v1/workflows/"+id, "")
	if r.status != http.StatusOK {
		c.t.Fatalf("GET %s: %d %s", id, r.status, r.body)
	}
	var inst codeInstance
	r.decode(c.t, &inst)
	inst.etag = r.header.Get("ETag")
	if want := fmt.Sprintf(`"%d"`, inst.Version); inst.etag != want {
		c.t.Errorf("GET %s: ETag %s, version %d", id, inst.etag, inst.Version)
	}
	return inst
}

// lastCause is the cause of the newest version of workflow id.
func (c *codeClient) lastCause(id string) string {
	c.t.Helper()
	r := c.do("GET", "/v1/workflows/"+id+"/history", "")
	var h httpapi.HistoryResponse
	r.decode(c.t, &h)
	if r.status != http.StatusOK || len(h.Versions) == 0 {
		c.t.Fatalf("history of %s: %d %s", id, r.status, r.body)
	}
	return h.Versions[len(h.Versions)-1].Cause
}

// start starts workflow id of definition def with input.
func (c *codeClient) start(id, def, input string) {
	c.t.Helper()
	r := c.do("POST", "/v1/workflows", fmt.Sprintf(`{"id":%q,"definition":%q,"input":%s}`, id, def, input))
	r.want(c.t, http.StatusCreated, "start "+id)
	var inst codeInstance
	r.decode(c.t, &inst)
	if inst.Status != "RUNNING" {
		c.t.Errorf("started %s: %s, want RUNNING", id, r.body)
	}
}

// poll takes the task of workflow id that is queued for handler.
func (c *codeClient) poll(handler, id string) httpapi.TaskResponse {
	c.t.Helper()
	r := c.do("POST", "/v1/tasks/poll", fmt.Sprintf(`{"worker":"w1","handlers":[%q],"wait_seconds":0}`, handler))
	if r.status != http.StatusOK {
		c.t.Fatalf("poll %s: %d %s, want a task of %s", handler, r.status, r.body, id)
	}
	var task httpapi.TaskResponse
	r.decode(c.t, &task)
	if task.WorkflowID != id || task.Lease == "" {
		c.t.Fatalf("poll %s: %s, want a task of %s", handler, r.body, id)
	}
	return task
}

// checkpoint posts body (its lease set to lease) to step name of task.
func (c *codeClient) checkpoint(task, name, lease, body string) codeReply {
	c.t.Helper()
	return c.do("POST", "/v1/tasks/"+task+"/steps/"+name, withLease(lease, body))
}

func (c *codeClient) suspend(task, lease, waits string) codeReply {
	c.t.Helper()
	return c.do("POST", "/v1/tasks/"+task+"/suspend", withLease(lease, `"waits":`+waits))
}

// withLease is the JSON object of the fields rest with "lease": lease.
func withLease(lease, rest string) string {
	if rest == "" {
		return fmt.Sprintf(`{"lease":%q}`, lease)
	}
	return fmt.Sprintf(`{"lease":%q,%s}`, lease, rest)
}

const orderDef = "name: order\ncode: {handler: order}\nretry: {max_attempts: 2}\n"

func testCodeDefinitions(t *testing.T, c *codeClient) {
	r := c.do("PUT", "/v1/definitions/order", orderDef)
	r.want(t, http.StatusCreated, "a code definition")
	var put httpapi.DefinitionResponse
	r.decode(t, &put)
	if put.Name != "order" || put.Revision != 1 || r.header.Get("Location") != "/v1/definitions/order" {
		t.Errorf("PUT order: %s, Location %q", r.body, r.header.Get("Location"))
	}
	r = c.do("GET", "/v1/definitions/order", "")
	r.want(t, http.StatusOK, "GET order")
	var got struct {
		Revision   int `json:"revision"`
		Definition struct {
			Code  struct{ Handler string } `json:"code"`
			Retry struct {
				MaxAttempts int `json:"max_attempts"`
			} `json:"retry"`
			Steps []any `json:"steps"`
		} `json:"definition"`
	}
	r.decode(t, &got)
	if got.Revision != 1 || got.Definition.Code.Handler != "order" || got.Definition.Retry.MaxAttempts != 2 || got.Definition.Steps != nil {
		t.Errorf("GET order: %s", r.body)
	}
	// What an SDK does each time its worker starts: the same definition
	// again is no new revision.
	r = c.do("PUT", "/v1/definitions/order", orderDef)
	r.want(t, http.StatusOK, "the same code definition again")
	put = httpapi.DefinitionResponse{}
	r.decode(t, &put)
	if put.Revision != 1 || r.header.Get("Location") != "" {
		t.Errorf("PUT order again: %s, Location %q; want revision 1", r.body, r.header.Get("Location"))
	}
	c.do("GET", "/v1/definitions/order?revision=2", "").want(t, http.StatusNotFound, "a second revision", "revision")

	for _, tc := range []struct {
		name, yaml string
		says       []string
	}{
		{"no handler", "code: {}", []string{"code.handler: is required"}},
		{"empty handler", `code: {handler: ""}`, []string{"code.handler: is required"}},
		{"handler with a space", `code: {handler: "a b"}`, []string{"code.handler:", "space"}},
		{"steps", "code: {handler: h}\nsteps: [{id: a, type: wait}]", []string{"steps: a code definition has no steps"}},
		{"output", "code: {handler: h}\noutput: {x: 1}", []string{"output: a code definition's output is what its function returns"}},
		{"retry of steps", "retry: {max_attempts: 2}\nsteps: [{id: a, type: wait}]", []string{"retry: only a code definition has a retry of its own"}},
		{"explicit zero attempts", "code: {handler: h}\nretry: {max_attempts: 0}", []string{"retry.max_attempts: must be between 1 and"}},
		{"too many attempts", "code: {handler: h}\nretry: {max_attempts: 100000}", []string{"retry.max_attempts: must be between 1 and"}},
		{"negative backoff", "code: {handler: h}\nretry: {initial_backoff: -1s}", []string{`retry.initial_backoff: duration "-1s" must not be negative`}},
		{"unknown field of code", "code: {handler: h, queue: q}", []string{"queue"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "bad-" + strings.ReplaceAll(tc.name, " ", "-")
			c.do("PUT", "/v1/definitions/"+name, "name: "+name+"\n"+tc.yaml+"\n").want(t, http.StatusBadRequest, tc.name, tc.says...)
			c.do("GET", "/v1/definitions/"+name, "").want(t, http.StatusNotFound, "the refused definition")
		})
	}
}

// A flowd DAG definition with one task step, whose task's poll answer says
// "kind": "step".
const dagDef = "name: dag\nsteps: [{id: a, type: task, handler: dagwork}]\n"

func testCodeRuns(t *testing.T, c *codeClient) {
	c.do("PUT", "/v1/definitions/dag", dagDef).want(t, http.StatusCreated, "a DAG definition")
	c.start("dag-1", "dag", `{"n":0}`)
	step := c.poll("dagwork", "dag-1")
	if step.Kind != "step" || step.Journal != nil || step.Step != "a" {
		t.Errorf("a DAG task step's task: %+v, want kind step and no journal", step)
	}

	c.start("o-1", "order", `{"n":1}`)
	run := c.poll("order", "o-1")
	if run.Kind != "workflow" || !sameJSON(t, run.Journal, `{}`) || run.Attempt != 1 || !sameJSON(t, run.Input, `{"n":1}`) || run.Handler != "order" {
		t.Errorf("the run task: %+v, want kind workflow, journal {}, attempt 1 and the input", run)
	}
	before := c.instance("o-1")

	// A step recorded: 200 with the entry, one new version.
	r := c.checkpoint(run.TaskID, "a", run.Lease, `"output":{"x":1}`)
	r.want(t, http.StatusOK, "checkpoint a")
	if !sameJSON(t, r.body, `{"status":"COMPLETED","output":{"x":1},"attempts":1,"kind":"step","seq":1}`) {
		t.Errorf("checkpoint a: %s", r.body)
	}
	after := c.instance("o-1")
	if after.Version != before.Version+1 || !sameJSON(t, after.State.Steps["a"], string(r.body)) {
		t.Errorf("after checkpoint a: version %d (was %d), steps.a %s", after.Version, before.Version, after.State.Steps["a"])
	}
	if cause := c.lastCause("o-1"); cause != `step "a" completed` {
		t.Errorf("the checkpoint's cause: %q", cause)
	}
	// Again, with another output (a replay that ran it again): the first
	// one stands and nothing is written.
	r = c.checkpoint(run.TaskID, "a", run.Lease, `"output":{"x":2}`)
	r.want(t, http.StatusOK, "checkpoint a again")
	if !sameJSON(t, r.body, `{"status":"COMPLETED","output":{"x":1},"attempts":1,"kind":"step","seq":1}`) {
		t.Errorf("checkpoint a again: %s, want the first entry", r.body)
	}
	if again := c.instance("o-1"); again.Version != after.Version {
		t.Errorf("a checkpoint already recorded wrote version %d", again.Version)
	}

	// The second step of the same name; a step failed for good, its error a
	// string or an object's message; a step without output.
	for _, tc := range []struct {
		name, path, body, want string
	}{
		{"a#2", "a%232", `"output":"second"`, `{"status":"COMPLETED","output":"second","attempts":1,"kind":"step","seq":2}`},
		{"f", "f", `"error":"boom","attempts":2`, `{"status":"FAILED","error":"boom","attempts":2,"kind":"step","seq":3}`},
		{"g", "g", `"error":{"message":"m","type":"x"}`, `{"status":"FAILED","error":"m","attempts":1,"kind":"step","seq":4}`},
		{"h", "h", `"attempts":3`, `{"status":"COMPLETED","output":null,"attempts":3,"kind":"step","seq":5}`},
		{"i", "i", `"output":{"y":1},"error":null`, `{"status":"COMPLETED","output":{"y":1},"attempts":1,"kind":"step","seq":6}`},
		{"j", "j", `"output":null,"error":"e"`, `{"status":"FAILED","error":"e","attempts":1,"kind":"step","seq":7}`},
	} {
		r := c.checkpoint(run.TaskID, tc.path, run.Lease, tc.body)
		r.want(t, http.StatusOK, "checkpoint "+tc.name)
		if !sameJSON(t, r.body, tc.want) {
			t.Errorf("checkpoint %s: %s, want %s", tc.name, r.body, tc.want)
		}
	}
	inst := c.instance("o-1")
	if !sameJSON(t, inst.State.Steps["a#2"], `{"status":"COMPLETED","output":"second","attempts":1,"kind":"step","seq":2}`) ||
		!sameJSON(t, inst.State.Steps["g"], `{"status":"FAILED","error":"m","attempts":1,"kind":"step","seq":4}`) {
		t.Errorf("steps recorded: %s", inst.State.Steps)
	}
	if cause := c.lastCause("o-1"); cause != `step "j" failed` {
		t.Errorf("the last checkpoint's cause: %q", cause)
	}
	if cause := func() string {
		r := c.do("GET", "/v1/workflows/o-1/history", "")
		var h httpapi.HistoryResponse
		r.decode(t, &h)
		return h.Versions[len(h.Versions)-4].Cause
	}(); cause != `step "g" failed` {
		t.Errorf("a failed step's cause: %q", cause)
	}

	t.Run("CheckpointErrors", func(t *testing.T) {
		steps := "/v1/tasks/" + run.TaskID + "/steps/"
		version := c.instance("o-1").Version
		for _, tc := range []struct {
			what, path, body string
			status           int
			says             []string
		}{
			{"no lease", steps + "z", `{"output":1}`, 400, []string{`"lease" is required`}},
			{"empty lease", steps + "z", `{"lease":" ","output":1}`, 400, []string{`"lease" is required`}},
			{"wrong lease", steps + "z", `{"lease":"nope","output":1}`, 409, []string{"task " + run.TaskID, "not its current one"}},
			{"unknown task", "/v1/tasks/no-such/steps/z", `{"lease":"x","output":1}`, 404, []string{"no-such"}},
			{"a space in the name", steps + "a%20b", withLease(run.Lease, `"output":1`), 400, []string{`step id "a b"`}},
			{"not a number after #", steps + "a%23x", withLease(run.Lease, `"output":1`), 400, []string{`step "a#x": what follows '#' must be a number from 2 on`}},
			{"#1", steps + "a%231", withLease(run.Lease, `"output":1`), 400, []string{`step "a#1": what follows '#' must be a number from 2 on`}},
			{"#02", steps + "a%2302", withLease(run.Lease, `"output":1`), 400, []string{`what follows '#' must be a number from 2 on`}},
			{"a name too long", steps + strings.Repeat("n", 129), withLease(run.Lease, `"output":1`), 400, []string{"at most 128"}},
			{"output and error", steps + "z", withLease(run.Lease, `"output":1,"error":"e"`), 400, []string{`"output" or "error", not both`}},
			{"negative attempts", steps + "z", withLease(run.Lease, `"error":"e","attempts":-1`), 400, []string{`"attempts" must not be negative`}},
			{"fractional attempts", steps + "z", withLease(run.Lease, `"output":1,"attempts":1.5`), 400, []string{"attempts"}},
			{"a step task's id", "/v1/tasks/" + step.TaskID + "/steps/z", withLease(step.Lease, `"output":1`), 400, []string{"is a step's task, not the run of a code workflow"}},
			{"not JSON", steps + "z", `{"lease":`, 400, []string{"JSON"}},
			{"not an object", steps + "z", `[1]`, 400, []string{"invalid JSON body", "not array"}},
			{"unknown field", steps + "z", withLease(run.Lease, `"output":1,"outptu":2`), 400, []string{`unknown field "outptu"`}},
		} {
			c.do("POST", tc.path, tc.body).want(t, tc.status, tc.what, tc.says...)
		}
		if inst := c.instance("o-1"); inst.Version != version || inst.State.Steps["z"] != nil || inst.Status != "RUNNING" {
			t.Errorf("refused checkpoints wrote version %d (was %d): %s", inst.Version, version, inst.State.Steps)
		}
		// The DAG's task is still its own, and completes as before.
		c.do("POST", "/v1/tasks/"+step.TaskID+"/complete", withLease(step.Lease, `"output":1`)).want(t, http.StatusOK, "the DAG task completes")
	})

	t.Run("SuspendErrors", func(t *testing.T) {
		for _, tc := range []struct {
			what, body string
			says       []string
		}{
			{"no waits", withLease(run.Lease, ""), []string{`"waits" must name at least one thing`}},
			{"empty waits", withLease(run.Lease, `"waits":{}`), []string{`"waits" must name at least one thing`}},
			{"null waits", withLease(run.Lease, `"waits":null`), []string{`"waits" must name at least one thing`}},
			{"no lease", `{"waits":{"nap":{"sleep":"1s"}}}`, []string{`"lease" is required`}},
			{"a wait for nothing", withLease(run.Lease, `"waits":{"nap":{}}`), []string{"waits.nap: say what the run waits for"}},
			{"sleep and event", withLease(run.Lease, `"waits":{"nap":{"sleep":"1s","event":"e"}}`), []string{"waits.nap: a wait is one of a sleep, an event or a child"}},
			{"sleep not a duration", withLease(run.Lease, `"waits":{"nap":{"sleep":"abc"}}`), []string{`waits.nap.sleep: "abc" is not a duration`}},
			{"negative sleep", withLease(run.Lease, `"waits":{"nap":{"sleep":"-1s"}}`), []string{`waits.nap.sleep: "-1s" is not a duration`}},
			{"sleep as a number", withLease(run.Lease, `"waits":{"nap":{"sleep":10}}`), []string{"sleep"}},
			{"bad event name", withLease(run.Lease, `"waits":{"paid":{"event":"pay ment"}}`), []string{"waits.paid.event"}},
			{"empty event name", withLease(run.Lease, `"waits":{"paid":{"event":""}}`), []string{"waits.paid.event"}},
			{"key too long", withLease(run.Lease, `"waits":{"paid":{"event":"payment","key":"`+strings.Repeat("k", 2000)+`"}}`), []string{"waits.paid.key is longer than"}},
			{"bad wait name", withLease(run.Lease, `"waits":{"a b":{"sleep":"1s"}}`), []string{`waits: invalid id: step id "a b" has character ' '`}},
			{"bad wait number", withLease(run.Lease, `"waits":{"nap#1":{"sleep":"1s"}}`), []string{"waits:", "what follows '#'"}},
			{"unknown field of a wait", withLease(run.Lease, `"waits":{"nap":{"sleep":"1s","until":"x"}}`), []string{`unknown field "until"`}},
		} {
			c.do("POST", "/v1/tasks/"+run.TaskID+"/suspend", tc.body).want(t, http.StatusBadRequest, tc.what, tc.says...)
		}
		c.suspend(run.TaskID, "nope", `{"nap":{"sleep":"1s"}}`).want(t, http.StatusConflict, "suspend with a wrong lease", "not its current one")
		c.suspend("no-such", run.Lease, `{"nap":{"sleep":"1s"}}`).want(t, http.StatusNotFound, "suspend of an unknown task", "no-such")
		c.suspend(step.TaskID, step.Lease, `{"nap":{"sleep":"1s"}}`).want(t, http.StatusConflict, "suspend of a completed step task", "not its current one")
		if inst := c.instance("o-1"); inst.State.Steps["nap"] != nil || inst.State.Steps["paid"] != nil {
			t.Errorf("refused suspends recorded something: %s", inst.State.Steps)
		}
	})

	// The run ends sleeping: its lease is over.
	before = c.instance("o-1")
	r = c.suspend(run.TaskID, run.Lease, `{"nap":{"sleep":"1h"}}`)
	r.want(t, http.StatusOK, "suspend")
	if !sameJSON(t, r.body, fmt.Sprintf(`{"task_id":%q,"status":"suspended"}`, run.TaskID)) {
		t.Errorf("suspend: %s", r.body)
	}
	inst = c.instance("o-1")
	var nap struct {
		Status, Kind, Until string
		Seq                 int
	}
	if err := json.Unmarshal(inst.State.Steps["nap"], &nap); err != nil || nap.Status != "WAITING" || nap.Kind != "sleep" || nap.Until == "" || nap.Seq != 8 {
		t.Errorf("steps.nap: %s", inst.State.Steps["nap"])
	}
	if inst.Status != "RUNNING" || inst.Version != before.Version+1 {
		t.Errorf("the suspended workflow: %s version %d (was %d)", inst.Status, inst.Version, before.Version)
	}
	if cause := c.lastCause("o-1"); cause != "run waits for nap" {
		t.Errorf("the suspend's cause: %q", cause)
	}
	c.checkpoint(run.TaskID, "b", run.Lease, `"output":1`).want(t, http.StatusConflict, "a checkpoint of the suspended run", "not its current one")
	c.suspend(run.TaskID, run.Lease, `{"nap":{"sleep":"1h"}}`).want(t, http.StatusConflict, "the same suspend again", "not its current one")
	c.do("POST", "/v1/tasks/"+run.TaskID+"/complete", withLease(run.Lease, `"output":1`)).want(t, http.StatusConflict, "completing the suspended run", "not its current one")
	if r := c.do("POST", "/v1/tasks/poll", `{"worker":"w1","handlers":["order"],"wait_seconds":0}`); r.status != http.StatusNoContent {
		t.Errorf("a poll while the run sleeps: %d %s", r.status, r.body)
	}
}

// A run waits for an event; the event queues the next run, whose journal
// has the event's data; its completion completes the workflow.
func testCodeEventWait(t *testing.T, c *codeClient) {
	c.start("o-2", "order", `{"n":2}`)
	run := c.poll("order", "o-2")
	c.suspend(run.TaskID, run.Lease, `{"paid":{"event":"payment","key":"k1"}}`).want(t, http.StatusOK, "suspend on an event")
	inst := c.instance("o-2")
	var paid struct {
		Status, Kind string
		Event        struct{ Name, Key string }
	}
	if err := json.Unmarshal(inst.State.Steps["paid"], &paid); err != nil || paid.Status != "WAITING" || paid.Kind != "event" || paid.Event.Name != "payment" || paid.Event.Key != "k1" {
		t.Errorf("steps.paid: %s", inst.State.Steps["paid"])
	}
	// Another key is not this wait's event.
	r := c.do("POST", "/v1/events", `{"name":"payment","key":"k2","data":{"a":0}}`)
	r.want(t, http.StatusAccepted, "an event of another key")
	var ev httpapi.PublishEventResponse
	r.decode(t, &ev)
	if len(ev.Delivered) != 0 {
		t.Errorf("an event of another key was delivered to %v", ev.Delivered)
	}
	r = c.do("POST", "/v1/events", `{"name":"payment","key":"k1","data":{"a":1}}`)
	r.want(t, http.StatusAccepted, "the event")
	ev = httpapi.PublishEventResponse{}
	r.decode(t, &ev)
	if len(ev.Delivered) != 1 || ev.Delivered[0] != "o-2" {
		t.Errorf("the event: %s, want it delivered to o-2", r.body)
	}
	next := c.poll("order", "o-2")
	var journal map[string]struct {
		Status string
		Output json.RawMessage
	}
	if err := json.Unmarshal(next.Journal, &journal); err != nil || journal["paid"].Status != "COMPLETED" || !sameJSON(t, journal["paid"].Output, `{"a":1}`) {
		t.Errorf("the journal of run 2: %s", next.Journal)
	}
	if next.Kind != "workflow" || next.Attempt != 1 || next.TaskID == run.TaskID || !sameJSON(t, next.Input, `{"n":2}`) {
		t.Errorf("run 2: %+v", next)
	}
	c.checkpoint(run.TaskID, "b", run.Lease, `"output":1`).want(t, http.StatusConflict, "the first run's lease after the event", "not its current one")

	// The function returns.
	r = c.do("POST", "/v1/tasks/"+next.TaskID+"/complete", withLease(next.Lease, `"output":{"done":true}`))
	r.want(t, http.StatusOK, "complete the run")
	inst = c.instance("o-2")
	if inst.Status != "COMPLETED" || !sameJSON(t, inst.Output, `{"done":true}`) {
		t.Errorf("the completed workflow: %s output %s", inst.Status, inst.Output)
	}
	c.checkpoint(next.TaskID, "c", next.Lease, `"output":1`).want(t, http.StatusConflict, "a checkpoint after the run completed", "not its current one")
}

// A name recorded as a step, now asked for as a sleep: the workflow fails
// for good with an error naming the step and both kinds.
func testCodeNonDeterminism(t *testing.T, c *codeClient) {
	c.start("o-3", "order", `{"n":3}`)
	run := c.poll("order", "o-3")
	c.checkpoint(run.TaskID, "x", run.Lease, `"output":1`).want(t, http.StatusOK, "checkpoint x")
	c.suspend(run.TaskID, run.Lease, `{"x":{"sleep":"1s"}}`).want(t, http.StatusConflict, "x as a sleep",
		`step "x" was recorded as a step, and the code now asks for a sleep`)
	inst := c.instance("o-3")
	var code struct{ Error string }
	if err := json.Unmarshal(inst.State.Code, &code); err != nil || inst.Status != "FAILED" || !strings.Contains(code.Error, `non-determinism: step "x"`) {
		t.Errorf("after non-determinism: %s, state.code %s", inst.Status, inst.State.Code)
	}
	c.checkpoint(run.TaskID, "y", run.Lease, `"output":1`).want(t, http.StatusConflict, "a checkpoint of the failed run")

	// The other way round: a sleep recorded, now asked for as a step.
	c.start("o-4", "order", `{"n":4}`)
	run = c.poll("order", "o-4")
	c.suspend(run.TaskID, run.Lease, `{"nap":{"sleep":"1h"},"paid":{"event":"payment","key":"o-4"}}`).want(t, http.StatusOK, "two waits")
	c.do("POST", "/v1/events", `{"name":"payment","key":"o-4"}`).want(t, http.StatusAccepted, "the event of o-4")
	run = c.poll("order", "o-4")
	c.checkpoint(run.TaskID, "nap", run.Lease, `"output":1`).want(t, http.StatusConflict, "nap as a step",
		`step "nap" was recorded as a sleep, and the code now asks for a step`)
	if inst := c.instance("o-4"); inst.Status != "FAILED" {
		t.Errorf("after non-determinism: %s", inst.Status)
	}
}

// The code routes are a worker's: a worker token may use them, a reader's
// is refused before anything is read.
func TestCodeRoutesAccess(t *testing.T) {
	t.Parallel()
	var lines []string
	for _, l := range roleTokens {
		lines = append(lines, l)
	}
	admin := codeServer(t, backends[0].open, lines).as("tok-admin")
	worker, reader := admin.as("tok-worker"), admin.as("tok-reader")
	admin.do("PUT", "/v1/definitions/order", orderDef).want(t, http.StatusCreated, "PUT order")
	admin.start("o-1", "order", `{}`)
	run := worker.poll("order", "o-1")

	reader.checkpoint(run.TaskID, "a", run.Lease, `"output":1`).want(t, http.StatusForbidden, "a reader's checkpoint", "role reader", needs(workers))
	reader.suspend(run.TaskID, run.Lease, `{"nap":{"sleep":"1h"}}`).want(t, http.StatusForbidden, "a reader's suspend", "role reader", needs(workers))
	admin.as("").checkpoint(run.TaskID, "a", run.Lease, `"output":1`).want(t, http.StatusUnauthorized, "a checkpoint without a token")
	if inst := admin.instance("o-1"); len(inst.State.Steps) != 0 {
		t.Errorf("refused requests recorded steps: %s", inst.State.Steps)
	}
	worker.checkpoint(run.TaskID, "a", run.Lease, `"output":1`).want(t, http.StatusOK, "a worker's checkpoint")
	worker.suspend(run.TaskID, run.Lease, `{"nap":{"sleep":"1h"}}`).want(t, http.StatusOK, "a worker's suspend")
	if inst := admin.instance("o-1"); inst.State.Steps["a"] == nil || inst.State.Steps["nap"] == nil {
		t.Errorf("a worker's requests: %s", inst.State.Steps)
	}
}

// A handler in flowd's own namespace ("flowd:sleep", "flowd:event/…") is
// an engine queue no worker may poll: a code definition naming one is
// refused, or its runs would wait forever (or be taken by the engine).
func TestCodeHandlerIsNotAnEngineQueue(t *testing.T) {
	t.Parallel()
	c := codeServer(t, backends[0].open, nil)
	for _, h := range []string{"flowd:sleep", "flowd:event/payment", "flowd:x"} {
		c.do("PUT", "/v1/definitions/engine-queue", "name: engine-queue\ncode: {handler: '"+h+"'}\n").
			want(t, http.StatusBadRequest, "code.handler "+h, "code.handler:", "flowd:")
	}
	c.do("GET", "/v1/definitions/engine-queue", "").want(t, http.StatusNotFound, "the refused definition")
}
