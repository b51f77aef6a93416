package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/client"
	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/httpapi"
	"github.com/flowd/flowd/store/sqlite"
	"github.com/flowd/flowd/workflow"
)

// clientBundle is what one client test needs: a real API server over a fresh
// in-memory SQLite store, and a client of it.
type clientBundle struct {
	c     *client.Client
	url   string
	store *sqlite.Store
	seen  *requestLog
}

// requestLog records the requests the client sent, to check headers.
type requestLog struct {
	mu   sync.Mutex
	reqs []*http.Request
}

func (l *requestLog) last() *http.Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reqs[len(l.reqs)-1]
}

type recordingTransport struct{ log *requestLog }

func (rt recordingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rt.log.mu.Lock()
	rt.log.reqs = append(rt.log.reqs, r.Clone(r.Context()))
	rt.log.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

func setupClient(t *testing.T, tokens []string, opts ...client.Option) *clientBundle {
	t.Helper()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, "sqlite::memory:", sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	api, err := httpapi.NewServer(httpapi.Config{Store: st, Tokens: httpapi.AdminTokens(tokens...)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	log := &requestLog{}
	opts = append([]client.Option{client.WithHTTPClient(&http.Client{Transport: recordingTransport{log}})}, opts...)
	return &clientBundle{c: client.New(srv.URL, opts...), url: srv.URL, store: st, seen: log}
}

// create makes a free-form instance with the given state (may be "").
func (b *clientBundle) create(t *testing.T, id, state string) *workflow.Instance {
	t.Helper()
	inst, err := b.c.CreateWorkflow(t.Context(), api.CreateWorkflowRequest{ID: id, State: json.RawMessage(state)})
	if err != nil {
		t.Fatalf("create %s: %v", id, err)
	}
	return inst
}

// wantStatus checks that err is an *APIError with the status, a reason phrase,
// a message and a request id, and that exactly the matching Is* helper says so.
func wantStatus(t *testing.T, err error, status int) {
	t.Helper()
	var ae *client.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("error %v (%T) is not an *APIError; want %d", err, err, status)
	}
	if ae.StatusCode != status || client.StatusCode(err) != status {
		t.Fatalf("status %d, want %d (%v)", ae.StatusCode, status, err)
	}
	if ae.Reason != http.StatusText(status) || ae.Message == "" || ae.RequestID == "" {
		t.Errorf("APIError %+v lacks reason, message or request id", ae)
	}
	if prefix := fmt.Sprintf("%d %s: ", status, http.StatusText(status)); !strings.HasPrefix(err.Error(), prefix) {
		t.Errorf("Error() = %q, want prefix %q", err.Error(), prefix)
	}
	helpers := map[int]func(error) bool{
		404: client.IsNotFound, 409: client.IsConflict, 412: client.IsPreconditionFailed,
		428: client.IsPreconditionRequired, 401: client.IsUnauthorized, 400: client.IsBadRequest,
	}
	for code, is := range helpers {
		if got := is(err); got != (code == status) {
			t.Errorf("Is-helper for %d = %v on a %d error", code, got, status)
		}
	}
	sentinels := map[int]error{
		400: client.ErrBadRequest, 401: client.ErrUnauthorized, 403: client.ErrForbidden,
		404: client.ErrNotFound, 409: client.ErrConflict, 412: client.ErrPreconditionFailed,
		413: client.ErrTooLarge, 415: client.ErrUnsupportedMediaType, 422: client.ErrUnprocessable,
		428: client.ErrPreconditionRequired, 503: client.ErrUnavailable,
	}
	for code, sentinel := range sentinels {
		if got := errors.Is(err, sentinel); got != (code == status) {
			t.Errorf("errors.Is(%d error, %v) = %v", status, sentinel, got)
		}
	}
	if errors.Is(err, client.ErrServer) != (status >= 500) {
		t.Errorf("errors.Is(%d error, ErrServer) = %v", status, !(status >= 500))
	}
}

func TestClientCreateAndGet(t *testing.T) {
	t.Parallel()
	b := setupClient(t, nil)
	ctx := t.Context()

	inst, err := b.c.CreateWorkflow(ctx, api.CreateWorkflowRequest{
		ID: "order-1", Input: json.RawMessage(`{"sku":"A-1"}`), State: json.RawMessage(`{"variables":{"n":1}}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	if inst.ID != "order-1" || inst.Version != 0 || inst.Status != workflow.StatusPending || string(inst.Input) != `{"sku":"A-1"}` {
		t.Fatalf("created %+v", inst)
	}
	if ct := b.seen.last().Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("create sent Content-Type %q", ct)
	}

	got, err := b.c.GetWorkflow(ctx, "order-1")
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if ok, err := got.State.Var("n", &n); !ok || err != nil || n != 1 || got.Version != 0 {
		t.Fatalf("got %+v (n=%d, %v)", got, n, err)
	}
	if ct := b.seen.last().Header.Get("Content-Type"); ct != "" {
		t.Errorf("GET sent Content-Type %q", ct)
	}

	auto, err := b.c.CreateWorkflow(ctx, api.CreateWorkflowRequest{})
	if err != nil || auto.ID == "" {
		t.Fatalf("create with a server id: %+v, %v", auto, err)
	}

	_, err = b.c.GetWorkflow(ctx, "nope")
	wantStatus(t, err, 404)
	_, err = b.c.CreateWorkflow(ctx, api.CreateWorkflowRequest{ID: "order-1"})
	wantStatus(t, err, 409)
	_, err = b.c.CreateWorkflow(ctx, api.CreateWorkflowRequest{ID: "bad id"})
	wantStatus(t, err, 400)
	_, err = b.c.CreateWorkflow(ctx, api.CreateWorkflowRequest{Definition: "no-such-definition"})
	wantStatus(t, err, 404)
}

func TestClientList(t *testing.T) {
	t.Parallel()
	b := setupClient(t, nil)
	ctx := t.Context()
	for _, id := range []string{"a", "b", "c"} {
		b.create(t, id, "")
	}
	if _, err := b.c.Transition(ctx, "b", workflow.StatusPending, workflow.StatusRunning); err != nil {
		t.Fatal(err)
	}

	var ids []string
	opts := client.ListOptions{Limit: 2}
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatal("paging does not end")
		}
		page, err := b.c.ListWorkflows(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range page.Workflows {
			ids = append(ids, w.ID)
		}
		if page.NextCursor == "" {
			break
		}
		opts.Cursor = page.NextCursor
	}
	if strings.Join(ids, ",") != "c,b,a" {
		t.Errorf("paged ids %v, want newest first c,b,a", ids)
	}

	running, err := b.c.ListWorkflows(ctx, client.ListOptions{Status: workflow.StatusRunning})
	if err != nil || len(running.Workflows) != 1 || running.Workflows[0].ID != "b" {
		t.Errorf("status filter: %+v, %v", running, err)
	}
	none, err := b.c.ListWorkflows(ctx, client.ListOptions{Definition: "order"})
	if err != nil || none.Workflows == nil || len(none.Workflows) != 0 {
		t.Errorf("definition filter: %+v, %v", none, err)
	}
	_, err = b.c.ListWorkflows(ctx, client.ListOptions{Limit: 5000})
	wantStatus(t, err, 400)
	_, err = b.c.ListWorkflows(ctx, client.ListOptions{Status: "running"})
	wantStatus(t, err, 400)
}

func TestClientPatch(t *testing.T) {
	t.Parallel()
	b := setupClient(t, nil)
	ctx := t.Context()
	b.create(t, "w", `{"variables":{"a":1,"b":2}}`)

	inst, err := b.c.PatchWorkflow(ctx, "w", api.ETag(0), json.RawMessage(`{"variables":{"a":10,"b":null}}`))
	if err != nil {
		t.Fatal(err)
	}
	if inst.Version != 1 || string(inst.State.Variables["a"]) != "10" || inst.State.Variables["b"] != nil {
		t.Fatalf("patched %+v", inst)
	}
	req := b.seen.last()
	if ct := req.Header.Get("Content-Type"); ct != "application/merge-patch+json" {
		t.Errorf("PATCH Content-Type %q", ct)
	}
	if im := req.Header.Get("If-Match"); im != `"0"` {
		t.Errorf("PATCH If-Match %q", im)
	}

	_, err = b.c.PatchWorkflow(ctx, "w", api.ETag(0), json.RawMessage(`{"variables":{"a":11}}`))
	wantStatus(t, err, 412)
	_, err = b.c.PatchWorkflow(ctx, "w", "", json.RawMessage(`{}`))
	wantStatus(t, err, 428)
	_, err = b.c.PatchWorkflow(ctx, "w", "1", json.RawMessage(`{}`)) // not quoted: malformed
	wantStatus(t, err, 400)
	_, err = b.c.PatchWorkflow(ctx, "w", `"1"`, json.RawMessage(`[1]`))
	wantStatus(t, err, 400)
	_, err = b.c.PatchWorkflow(ctx, "missing", "*", json.RawMessage(`{}`))
	wantStatus(t, err, 404)

	inst, err = b.c.PatchWorkflow(ctx, "w", "*", json.RawMessage(`{"variables":{"c":true}}`))
	if err != nil || inst.Version != 2 {
		t.Fatalf("If-Match * : %+v, %v", inst, err)
	}
	if _, err := b.c.Action(ctx, "w", "cancel"); err != nil {
		t.Fatal(err)
	}
	_, err = b.c.PatchWorkflow(ctx, "w", "*", json.RawMessage(`{}`))
	wantStatus(t, err, 409)
}

func TestClientTransitionAndActions(t *testing.T) {
	t.Parallel()
	b := setupClient(t, nil)
	ctx := t.Context()
	b.create(t, "w", "")

	inst, err := b.c.Transition(ctx, "w", workflow.StatusPending, workflow.StatusRunning)
	if err != nil || inst.Status != workflow.StatusRunning || inst.Version != 1 {
		t.Fatalf("transition: %+v, %v", inst, err)
	}
	_, err = b.c.Transition(ctx, "w", workflow.StatusPending, workflow.StatusRunning)
	wantStatus(t, err, 409)
	_, err = b.c.Transition(ctx, "w", workflow.StatusPending, workflow.StatusCompleted)
	wantStatus(t, err, 422)
	_, err = b.c.Transition(ctx, "missing", workflow.StatusPending, workflow.StatusRunning)
	wantStatus(t, err, 404)

	steps := []struct {
		action string
		want   workflow.Status
	}{{"pause", workflow.StatusPaused}, {"resume", workflow.StatusRunning}, {"cancel", workflow.StatusCancelled}}
	for i, s := range steps {
		inst, err := b.c.Action(ctx, "w", s.action)
		if err != nil || inst.Status != s.want || inst.Version != int64(2+i) {
			t.Fatalf("%s: %+v, %v", s.action, inst, err)
		}
	}
	_, err = b.c.Action(ctx, "w", "retry")
	wantStatus(t, err, 409)
	_, err = b.c.Action(ctx, "missing", "pause")
	wantStatus(t, err, 404)

	_, err = b.c.Action(ctx, "w", "explode")
	if err == nil || client.StatusCode(err) != 0 || !strings.Contains(err.Error(), "unknown action") {
		t.Errorf("unknown action: %v", err)
	}
}

func TestClientCompleteStep(t *testing.T) {
	t.Parallel()
	b := setupClient(t, nil)
	ctx := t.Context()
	b.create(t, "w", `{"steps":{"approve":{"status":"WAITING"},"ship":{"status":"PENDING"}}}`)

	inst, err := b.c.CompleteStep(ctx, "w", "approve", api.ETag(0), json.RawMessage(`{"by":"ana"}`))
	if err != nil {
		t.Fatal(err)
	}
	st := inst.State.Steps["approve"]
	if inst.Version != 1 || st.Status != workflow.StepCompleted || string(st.Output) != `{"by":"ana"}` {
		t.Fatalf("completed %+v / %+v", inst, st)
	}
	if inst.Status != workflow.StatusPending {
		t.Errorf("completing a step changed the instance status to %s", inst.Status)
	}

	_, err = b.c.CompleteStep(ctx, "w", "ship", api.ETag(0), nil)
	wantStatus(t, err, 412)
	_, err = b.c.CompleteStep(ctx, "w", "ship", "", nil)
	wantStatus(t, err, 428)
	_, err = b.c.CompleteStep(ctx, "w", "nope", "*", nil)
	wantStatus(t, err, 404)
	_, err = b.c.CompleteStep(ctx, "missing", "ship", "*", nil)
	wantStatus(t, err, 404)
	_, err = b.c.CompleteStep(ctx, "w", "approve", "*", nil)
	wantStatus(t, err, 409)

	inst, err = b.c.CompleteStep(ctx, "w", "ship", api.ETag(1), nil)
	if err != nil || string(inst.State.Steps["ship"].Output) != "null" {
		t.Fatalf("complete without output: %+v, %v", inst, err)
	}
}

func TestClientBatchStatus(t *testing.T) {
	t.Parallel()
	b := setupClient(t, nil)
	ctx := t.Context()
	for _, id := range []string{"a", "b", "c"} {
		b.create(t, id, "")
	}
	limit := 2
	ids, err := b.c.BatchStatus(ctx, api.BatchStatusRequest{
		Status: workflow.StatusPending, NewStatus: workflow.StatusCancelled,
		UpdatedBefore: time.Now().Add(time.Hour).UTC().Format(time.RFC3339), Limit: &limit,
	})
	if err != nil || len(ids) != 2 {
		t.Fatalf("batch: %v, %v", ids, err)
	}
	ids, err = b.c.BatchStatus(ctx, api.BatchStatusRequest{
		Status: workflow.StatusPending, NewStatus: workflow.StatusCancelled,
		UpdatedBefore: time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), Limit: &limit,
	})
	if err != nil || ids == nil || len(ids) != 0 {
		t.Fatalf("empty batch: %#v, %v", ids, err)
	}

	_, err = b.c.BatchStatus(ctx, api.BatchStatusRequest{
		Status: workflow.StatusPending, NewStatus: workflow.StatusCompleted, UpdatedBefore: "2030-01-01T00:00:00Z", Limit: &limit,
	})
	wantStatus(t, err, 422)
	zero := 0
	_, err = b.c.BatchStatus(ctx, api.BatchStatusRequest{
		Status: workflow.StatusPending, NewStatus: workflow.StatusCancelled, UpdatedBefore: "2030-01-01T00:00:00Z", Limit: &zero,
	})
	wantStatus(t, err, 400)
	_, err = b.c.BatchStatus(ctx, api.BatchStatusRequest{
		Status: workflow.StatusPending, NewStatus: workflow.StatusCancelled, UpdatedBefore: "yesterday", Limit: &limit,
	})
	wantStatus(t, err, 400)
}

func TestClientHistory(t *testing.T) {
	t.Parallel()
	b := setupClient(t, nil)
	ctx := t.Context()
	b.create(t, "w", "")
	if _, err := b.c.PatchWorkflow(ctx, "w", `"0"`, json.RawMessage(`{"variables":{"x":1}}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.c.Action(ctx, "w", "cancel"); err != nil {
		t.Fatal(err)
	}
	h, err := b.c.History(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 3 {
		t.Fatalf("history has %d versions, want 3: %+v", len(h), h)
	}
	for i, e := range h {
		if e.Version != int64(i) || e.At.IsZero() || e.Cause == "" {
			t.Errorf("history[%d] = %+v", i, e)
		}
	}
	if h[2].Status != workflow.StatusCancelled || string(h[1].State.Variables["x"]) != "1" {
		t.Errorf("history content: %+v", h)
	}
	_, err = b.c.History(ctx, "missing")
	wantStatus(t, err, 404)
}

func TestClientHealthz(t *testing.T) {
	t.Parallel()
	b := setupClient(t, nil)
	if err := b.c.Healthz(t.Context()); err != nil {
		t.Fatal(err)
	}
	b.store.Close()
	err := b.c.Healthz(t.Context())
	if client.StatusCode(err) != http.StatusServiceUnavailable {
		t.Fatalf("healthz on a closed database: %v", err)
	}
}

func TestClientAuth(t *testing.T) {
	t.Parallel()
	b := setupClient(t, []string{"s3cret"})
	ctx := t.Context()
	_, err := b.c.ListWorkflows(ctx, client.ListOptions{})
	wantStatus(t, err, 401)

	authed := client.New(b.url, client.WithToken("s3cret"))
	if _, err := authed.CreateWorkflow(ctx, api.CreateWorkflowRequest{ID: "w"}); err != nil {
		t.Fatal(err)
	}
	if _, err := authed.GetWorkflow(ctx, "w"); err != nil {
		t.Fatal(err)
	}
	wrong := client.New(b.url, client.WithToken("s3cre"))
	_, err = wrong.GetWorkflow(ctx, "w")
	wantStatus(t, err, 401)
	if err := b.c.Healthz(ctx); err != nil {
		t.Errorf("healthz needs no token: %v", err)
	}
}

// A server whose ETag disagrees with the body's version must not be trusted:
// the caller would send the wrong If-Match next.
func TestClientChecksETag(t *testing.T) {
	t.Parallel()
	for name, etag := range map[string]string{"wrong": `"2"`, "weak": `W/"3"`, "missing": ""} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if etag != "" {
				w.Header().Set("ETag", etag)
			}
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id":"w","status":"PENDING","state":{},"input":{},"version":3}`)
		}))
		defer srv.Close()
		_, err := client.New(srv.URL).GetWorkflow(t.Context(), "w")
		if err == nil || !strings.Contains(err.Error(), "ETag") {
			t.Errorf("%s ETag: err = %v, want an ETag mismatch", name, err)
		}
	}
}

func TestClientDoesNotFollowRedirectsOfWrites(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	hits := map[string]int{}
	mux := http.NewServeMux()
	mux.HandleFunc("/old/v1/", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/new"+strings.TrimPrefix(r.URL.Path, "/old"), http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/new/v1/", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.Method]++
		mu.Unlock()
		w.Header().Set("ETag", `"0"`)
		fmt.Fprint(w, `{"id":"w","status":"PENDING","state":{},"input":{},"version":0}`)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	hc := &http.Client{}
	c := client.New(srv.URL+"/old/", client.WithHTTPClient(hc))
	if hc.CheckRedirect != nil {
		t.Error("NewClient modified the caller's *http.Client")
	}
	if _, err := c.GetWorkflow(t.Context(), "w"); err != nil {
		t.Errorf("GET through a redirect: %v", err)
	}
	_, err := c.PatchWorkflow(t.Context(), "w", "*", json.RawMessage(`{}`))
	if client.StatusCode(err) != http.StatusTemporaryRedirect || !strings.Contains(err.Error(), "/new/v1/workflows/w") {
		t.Errorf("PATCH through a redirect: %v", err)
	}
	_, err = c.Action(t.Context(), "w", "cancel")
	if client.StatusCode(err) != http.StatusTemporaryRedirect {
		t.Errorf("POST through a redirect: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if hits["GET"] != 1 || hits["PATCH"] != 0 || hits["POST"] != 0 {
		t.Errorf("requests that reached the redirect target: %v", hits)
	}
}

// An error that is not flowd's own (a proxy's HTML page) still becomes an
// *APIError with the status and a short excerpt.
func TestClientForeignErrorBody(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		fmt.Fprint(w, "<html>\n  <body>upstream   down</body>\n</html>\n"+strings.Repeat("x", 500))
	}))
	defer srv.Close()
	_, err := client.New(srv.URL).GetWorkflow(t.Context(), "w")
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.StatusCode != 502 || ae.Reason != "Bad Gateway" {
		t.Fatalf("err = %#v", err)
	}
	if !strings.HasPrefix(ae.Message, "<html> <body>upstream down</body> </html>") || len(ae.Message) > 210 {
		t.Errorf("message %q", ae.Message)
	}
}

func TestClientBadBaseURL(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"127.0.0.1:8080", "ftp://host", "http://", "http://u:p@host", "http://host/?x=1", "http://[::1"} {
		_, err := client.New(u).GetWorkflow(context.Background(), "w")
		if err == nil || client.StatusCode(err) != 0 || !strings.Contains(err.Error(), "server URL") {
			t.Errorf("NewClient(%q): err = %v", u, err)
		}
	}
}

func TestClientTransportError(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	err := client.New(url).Healthz(t.Context())
	if err == nil || client.StatusCode(err) != 0 || client.IsNotFound(err) {
		t.Fatalf("unreachable server: %v", err)
	}
}

// "." and ".." are valid ids (and step ids); they must reach the instance, not
// be resolved as path segments by the router.
func TestClientDotIDs(t *testing.T) {
	t.Parallel()
	b := setupClient(t, nil)
	// "." and ".." would be resolved away as URL path segments: they are not ids.
	for _, id := range []string{".", ".."} {
		_, err := b.c.CreateWorkflow(t.Context(), api.CreateWorkflowRequest{ID: id})
		if client.StatusCode(err) != 400 || !strings.Contains(err.Error(), "reserved") {
			t.Errorf("create %q: %v, want 400 naming the id reserved", id, err)
		}
	}
}

const clientOrderYAML = `name: order
steps:
  - id: reserve
    type: task
    handler: echo
    input: {sku: "{{ .input.sku }}"}
  - id: ship
    type: task
    handler: echo
    depends_on: [reserve]
    retry: {max_attempts: 2}
`

func TestClientDefinitions(t *testing.T) {
	t.Parallel()
	b := setupClient(t, nil)
	ctx := t.Context()

	if defs, err := b.c.ListDefinitions(ctx); err != nil || defs == nil || len(defs) != 0 {
		t.Fatalf("no definitions yet: %v, %v", defs, err)
	}
	resp, created, err := b.c.PutDefinition(ctx, "order", []byte(clientOrderYAML))
	if err != nil || !created || resp.Name != "order" || resp.Revision != 1 {
		t.Fatalf("first put: %+v, created %v, %v", resp, created, err)
	}
	if ct := b.seen.last().Header.Get("Content-Type"); ct != "application/yaml" {
		t.Errorf("YAML sent as %q", ct)
	}
	resp, created, err = b.c.PutDefinition(ctx, "order", []byte(clientOrderYAML))
	if err != nil || created || resp.Revision != 1 {
		t.Fatalf("same definition again: %+v, created %v, %v", resp, created, err)
	}
	asJSON := `{"name":"order","steps":[{"id":"reserve","type":"task","handler":"echo"}]}`
	resp, created, err = b.c.PutDefinition(ctx, "order", []byte(asJSON))
	if err != nil || !created || resp.Revision != 2 {
		t.Fatalf("changed definition: %+v, created %v, %v", resp, created, err)
	}
	if ct := b.seen.last().Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("JSON sent as %q", ct)
	}

	latest, err := b.c.GetDefinition(ctx, "order", 0)
	if err != nil || latest.Revision != 2 || len(definitionOf(t, latest).Steps) != 1 {
		t.Fatalf("latest: %+v, %v", latest, err)
	}
	first, err := b.c.GetDefinition(ctx, "order", 1)
	if err != nil || first.Revision != 1 || len(definitionOf(t, first).Steps) != 2 || definitionOf(t, first).Steps[1].DependsOn[0] != "reserve" {
		t.Fatalf("revision 1: %+v, %v", first, err)
	}
	if got := b.seen.last().URL.RawQuery; got != "revision=1" {
		t.Errorf("query %q", got)
	}
	defs, err := b.c.ListDefinitions(ctx)
	if err != nil || len(defs) != 1 || defs[0].Name != "order" || defs[0].Revision != 2 {
		t.Fatalf("list: %+v, %v", defs, err)
	}

	_, err = b.c.GetDefinition(ctx, "nope", 0)
	wantStatus(t, err, 404)
	_, err = b.c.GetDefinition(ctx, "order", 9)
	wantStatus(t, err, 404)
	if _, err := b.c.GetDefinition(ctx, "order", -1); err == nil || client.StatusCode(err) != 0 {
		t.Errorf("negative revision: %v", err)
	}

	// Every problem is listed, not just the first.
	bad := "name: bad\nsteps:\n  - {id: a, type: task}\n  - {id: b, type: wait, depends_on: [zz]}\n"
	_, _, err = b.c.PutDefinition(ctx, "bad", []byte(bad))
	wantStatus(t, err, 400)
	var ae *client.APIError
	if !errors.As(err, &ae) || len(ae.Problems) != 2 {
		t.Fatalf("problems of an invalid definition: %#v", err)
	}
	for i, want := range []string{"handler", "zz"} {
		if !strings.Contains(ae.Problems[i], want) {
			t.Errorf("problem %d = %q, want it to mention %q", i, ae.Problems[i], want)
		}
	}
	_, _, err = b.c.PutDefinition(ctx, "other-name", []byte(clientOrderYAML))
	wantStatus(t, err, 400)
	if _, _, err := b.c.PutDefinition(ctx, "", []byte(clientOrderYAML)); err == nil || client.StatusCode(err) != 0 {
		t.Errorf("empty name: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

func TestClientTasks(t *testing.T) {
	t.Parallel()
	b := setupClient(t, nil)
	ctx := t.Context()
	if _, _, err := b.c.PutDefinition(ctx, "order", []byte(clientOrderYAML)); err != nil {
		t.Fatal(err)
	}
	echo := api.PollRequest{Worker: "w1", Handlers: []string{"echo"}, WaitSeconds: ptr(2.0), LeaseSeconds: ptr(5.0)}

	// Nothing queued: 204 after the wait.
	none, err := b.c.PollTask(ctx, api.PollRequest{Handlers: []string{"echo"}})
	if none != nil || err != nil {
		t.Fatalf("empty queue: %+v, %v", none, err)
	}

	inst, err := b.c.CreateWorkflow(ctx, api.CreateWorkflowRequest{ID: "o1", Definition: "order", Input: json.RawMessage(`{"sku":"A-1"}`)})
	if err != nil {
		t.Fatal(err)
	}
	task, err := b.c.PollTask(ctx, echo)
	if err != nil || task == nil {
		t.Fatalf("poll: %+v, %v", task, err)
	}
	if task.WorkflowID != inst.ID || task.Step != "reserve" || task.Handler != "echo" || task.Attempt != 1 ||
		string(task.Input) != `{"sku":"A-1"}` || task.IdempotencyKey != "o1/reserve" || task.Lease == "" {
		t.Fatalf("task %+v", task)
	}
	if d := time.Until(task.LeaseUntil); d < 3*time.Second || d > 6*time.Second {
		t.Errorf("lease_seconds 5 gave a lease until %s (in %s)", task.LeaseUntil, d)
	}

	until, err := b.c.Heartbeat(ctx, task.TaskID, task.Lease, 20)
	if err != nil || time.Until(until) < 15*time.Second {
		t.Fatalf("heartbeat: %s, %v", until, err)
	}
	_, err = b.c.Heartbeat(ctx, task.TaskID, "not-the-lease", 0)
	wantStatus(t, err, 409)
	err = b.c.CompleteTask(ctx, task.TaskID, "not-the-lease", json.RawMessage(`{}`))
	wantStatus(t, err, 409)
	if err := b.c.CompleteTask(ctx, task.TaskID, task.Lease, json.RawMessage(`{"reserved":true}`)); err != nil {
		t.Fatal(err)
	}
	// Fenced: the lease ended with the completion.
	err = b.c.CompleteTask(ctx, task.TaskID, task.Lease, nil)
	wantStatus(t, err, 409)
	err = b.c.FailTask(ctx, task.TaskID, task.Lease, "late", true)
	wantStatus(t, err, 409)

	ship, err := b.c.PollTask(ctx, echo)
	if err != nil || ship == nil || ship.Step != "ship" {
		t.Fatalf("poll ship: %+v, %v", ship, err)
	}
	if err := b.c.FailTask(ctx, ship.TaskID, ship.Lease, "carrier refused the parcel", false); err != nil {
		t.Fatal(err)
	}
	got, err := b.c.GetWorkflow(ctx, "o1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != workflow.StatusFailed || got.State.Steps["ship"].Error != "carrier refused the parcel" ||
		got.State.Steps["ship"].Attempts != 1 || string(got.State.Steps["reserve"].Output) != `{"reserved":true}` {
		t.Errorf("a non-retryable failure fails the workflow: %s %+v", got.Status, got.State.Steps)
	}

	err = b.c.CompleteTask(ctx, "no-such-task", "lease", nil)
	wantStatus(t, err, 404)
	_, err = b.c.PollTask(ctx, api.PollRequest{Handlers: []string{"flowd:sleep"}})
	wantStatus(t, err, 400)
	_, err = b.c.PollTask(ctx, api.PollRequest{Handlers: []string{"echo"}, WaitSeconds: ptr(600.0)})
	wantStatus(t, err, 400)
	if err := b.c.CompleteTask(ctx, "t", "l", json.RawMessage(`{`)); err == nil || client.StatusCode(err) != 0 {
		t.Errorf("invalid output is refused before sending: %v", err)
	}
	if err := b.c.FailTask(ctx, "", "l", "x", true); err == nil || client.StatusCode(err) != 0 {
		t.Errorf("empty task id: %v", err)
	}
}

// A long poll outlasts the HTTP client's own timeout: the client gives that
// one request the time its wait needs.
func TestClientPollOutlastsHTTPTimeout(t *testing.T) {
	t.Parallel()
	b := setupClient(t, nil, client.WithHTTPClient(&http.Client{Timeout: 300 * time.Millisecond}))
	start := time.Now()
	task, err := b.c.PollTask(t.Context(), api.PollRequest{Handlers: []string{"echo"}, WaitSeconds: ptr(1.0)})
	if task != nil || err != nil {
		t.Fatalf("poll: %+v, %v", task, err)
	}
	if d := time.Since(start); d < time.Second {
		t.Errorf("the poll returned after %s, before its 1s wait", d)
	}
	// Other calls keep the short timeout.
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(time.Second)
	}))
	defer slow.Close()
	err = client.New(slow.URL, client.WithHTTPClient(&http.Client{Timeout: 300 * time.Millisecond})).Healthz(t.Context())
	if err == nil || !strings.Contains(err.Error(), "Timeout") {
		t.Errorf("a slow health check is cut at the client timeout: %v", err)
	}
}

// definitionOf reads the definition of a revision the client got.
func definitionOf(t *testing.T, info *api.DefinitionInfo) *workflow.Definition {
	t.Helper()
	d, err := engine.DefinitionFromAPI(info)
	if err != nil || d.Definition == nil {
		t.Fatalf("definition of %+v: %v", info, err)
	}
	return d.Definition
}
