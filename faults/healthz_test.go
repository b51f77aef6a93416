package faults_test

// The HTTP API while the database is down: /healthz says
// so, other routes fail fast with the API's JSON error body, and both come
// back by themselves when the database does.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/httpapi"
	"github.com/flowd/flowd/internal/pgtest"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

const apiRequestTimeout = 3 * time.Second

// apiResponse is what the test keeps of one request.
type apiResponse struct {
	status  int
	ctype   string
	body    []byte
	elapsed time.Duration
	err     error
}

func apiGet(client *http.Client, url string) apiResponse {
	began := time.Now()
	res, err := client.Get(url)
	if err != nil {
		return apiResponse{err: err, elapsed: time.Since(began)}
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	return apiResponse{status: res.StatusCode, ctype: res.Header.Get("Content-Type"), body: body, elapsed: time.Since(began), err: err}
}

// checkErrorBody asserts the API's error shape: JSON {"error", "message"}
// with the reason phrase of the status.
func checkErrorBody(t *testing.T, what string, r apiResponse) {
	t.Helper()
	if !strings.HasPrefix(r.ctype, "application/json") {
		t.Errorf("%s: Content-Type %q, want application/json", what, r.ctype)
	}
	var body httpapi.ErrorBody
	if err := json.Unmarshal(r.body, &body); err != nil || body.Error != http.StatusText(r.status) || body.Message == "" {
		t.Errorf("%s: body %s is not {\"error\": %q, \"message\": …} (%v)", what, r.body, http.StatusText(r.status), err)
	}
}

// TestHealthzDatabaseDown stops the server under a running API
// (httpapi.NewServer over the PostgreSQL store, RequestTimeout 3s) and
// starts it again.
func TestHealthzDatabaseDown(t *testing.T) {
	addr := pgtest.NewDatabase(t)
	in := faultCluster(t)
	st := openStore(t, addr)
	srv, err := httpapi.NewServer(httpapi.Config{Store: st, RequestTimeout: apiRequestTimeout})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	// The client's own timeout only keeps a hanging server from hanging the
	// test; the assertions are on the elapsed times.
	client := &http.Client{Timeout: 4 * apiRequestTimeout}
	ctx := context.Background()
	const id = "healthz-1"
	if _, err := st.Create(ctx, store.CreateParams{ID: id, Status: workflow.StatusRunning}); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/healthz", "/v1/workflows/" + id} {
		if r := apiGet(client, ts.URL+path); r.err != nil || r.status != http.StatusOK {
			t.Fatalf("GET %s before the outage: %d %s %v", path, r.status, r.body, r.err)
		}
	}

	stopBegan := time.Now()
	if err := in.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()

	// /healthz notices at once: 503, within a couple of seconds.
	var health apiResponse
	unhealthy := waitFor(2*time.Second, func() bool {
		health = apiGet(client, ts.URL+"/healthz")
		return health.err == nil && health.status == http.StatusServiceUnavailable
	})
	if !unhealthy {
		t.Fatalf("/healthz 2s after the server stopped: %d %s %v", health.status, health.body, health.err)
	}
	t.Logf("server stopped in %s; /healthz answered 503 %s after (that request took %s)",
		stopped.Sub(stopBegan).Round(time.Millisecond), time.Since(stopped).Round(time.Millisecond), health.elapsed.Round(time.Millisecond))
	checkErrorBody(t, "/healthz while the database is down", health)

	// Routes that need the database fail with a 503 JSON error, never
	// hanging past the request timeout.
	for _, path := range []string{"/v1/workflows/" + id, "/v1/workflows", "/v1/workflows/" + id + "/history"} {
		for i := range 3 {
			r := apiGet(client, ts.URL+path)
			if r.err != nil {
				t.Errorf("GET %s while the database is down: %v after %s", path, r.err, r.elapsed.Round(time.Millisecond))
				continue
			}
			if r.status != http.StatusServiceUnavailable {
				t.Errorf("GET %s while the database is down: %d %s, want 503 (store.ErrUnavailable)", path, r.status, r.body)
			}
			if r.elapsed > apiRequestTimeout+time.Second {
				t.Errorf("GET %s while the database is down took %s, past the request timeout %s", path, r.elapsed.Round(time.Millisecond), apiRequestTimeout)
			}
			checkErrorBody(t, "GET "+path+" while the database is down", r)
			if i == 0 {
				t.Logf("GET %s while the database is down: %d in %s: %s", path, r.status, r.elapsed.Round(time.Millisecond), strings.TrimSpace(string(r.body)))
			}
		}
	}

	startBegan := time.Now()
	if err := in.Start(ctx); err != nil {
		t.Fatal(err)
	}
	started := time.Now()

	// Both come back by themselves: same store, same server, no reopening.
	healthy := waitFor(5*time.Second, func() bool {
		health = apiGet(client, ts.URL+"/healthz")
		return health.err == nil && health.status == http.StatusOK
	})
	if !healthy {
		t.Fatalf("/healthz 5s after the server started again: %d %s %v", health.status, health.body, health.err)
	}
	t.Logf("server started in %s; /healthz answered 200 %s after", started.Sub(startBegan).Round(time.Millisecond),
		time.Since(started).Round(time.Millisecond))
	r := apiGet(client, ts.URL+"/v1/workflows/"+id)
	if r.err != nil || r.status != http.StatusOK {
		t.Fatalf("GET /v1/workflows/%s after the outage: %d %s %v", id, r.status, r.body, r.err)
	}
	var inst struct {
		ID      string `json:"id"`
		Version int64  `json:"version"`
	}
	if err := json.Unmarshal(r.body, &inst); err != nil || inst.ID != id || inst.Version != 0 {
		t.Errorf("GET /v1/workflows/%s after the outage: %s (%v)", id, r.body, err)
	}
}

// TestAPIDatabaseFrozen freezes the server (SIGSTOP to the postmaster and
// every process it forked): connections are accepted by the kernel but
// nothing answers, the case where only timeouts help. /healthz must still
// answer 503 within its own 2s ping timeout, and routes that read, write or
// run a transaction must answer 5xx by the request timeout; once the server
// thaws, everything works again by itself.
func TestAPIDatabaseFrozen(t *testing.T) {
	addr := pgtest.NewDatabase(t)
	faultCluster(t)
	st := openStore(t, addr)
	srv, err := httpapi.NewServer(httpapi.Config{Store: st, RequestTimeout: apiRequestTimeout})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	client := &http.Client{Timeout: 4 * apiRequestTimeout}
	ctx := context.Background()
	const id = "frozen-1"
	if _, err := st.Create(ctx, store.CreateParams{ID: id, Status: workflow.StatusRunning}); err != nil {
		t.Fatal(err)
	}
	if r := apiGet(client, ts.URL+"/v1/workflows/"+id); r.err != nil || r.status != http.StatusOK {
		t.Fatalf("GET before the freeze: %d %s %v", r.status, r.body, r.err)
	}

	fz := newFreezer(t, adminConn(t, addr))
	fz.freeze()
	frozenAt := time.Now()

	type call struct {
		name  string
		limit time.Duration
		do    func() apiResponse
	}
	send := func(method, path, ifMatch, body string) func() apiResponse {
		return func() apiResponse {
			req, err := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
			if err != nil {
				return apiResponse{err: err}
			}
			req.Header.Set("Content-Type", "application/json")
			if ifMatch != "" {
				req.Header.Set("If-Match", ifMatch)
			}
			began := time.Now()
			res, err := client.Do(req)
			if err != nil {
				return apiResponse{err: err, elapsed: time.Since(began)}
			}
			defer res.Body.Close()
			b, err := io.ReadAll(res.Body)
			return apiResponse{status: res.StatusCode, ctype: res.Header.Get("Content-Type"), body: b, elapsed: time.Since(began), err: err}
		}
	}
	// limit: the route's timeout and a second for scheduling under -race.
	calls := []call{
		{"GET /healthz", 2*time.Second + time.Second, send(http.MethodGet, "/healthz", "", "")},
		{"GET /v1/workflows/{id}", apiRequestTimeout + time.Second, send(http.MethodGet, "/v1/workflows/"+id, "", "")},
		{"PATCH /v1/workflows/{id}", apiRequestTimeout + time.Second, send(http.MethodPatch, "/v1/workflows/"+id, "*", `{"x": 1}`)},
		{"POST /v1/workflows/{id}/pause", apiRequestTimeout + time.Second, send(http.MethodPost, "/v1/workflows/"+id+"/pause", "", "")},
	}
	results := make([]apiResponse, len(calls))
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Go(func() { results[i] = c.do() })
	}
	wg.Wait()
	frozenFor := time.Since(frozenAt)
	fz.thaw()

	for i, c := range calls {
		r := results[i]
		switch {
		case r.err != nil:
			t.Errorf("%s on the frozen server: %v after %s", c.name, r.err, r.elapsed.Round(time.Millisecond))
			continue
		case r.status < 500 || r.status > 599:
			t.Errorf("%s on the frozen server: %d %s, want 5xx", c.name, r.status, r.body)
		case r.elapsed > c.limit:
			t.Errorf("%s on the frozen server took %s, more than %s", c.name, r.elapsed.Round(time.Millisecond), c.limit)
		}
		checkErrorBody(t, c.name+" on the frozen server", r)
		t.Logf("%s on the frozen server: %d in %s: %s", c.name, r.status, r.elapsed.Round(time.Millisecond), strings.TrimSpace(string(r.body)))
	}

	thawedAt := time.Now()
	var health apiResponse
	if !waitFor(5*time.Second, func() bool {
		health = apiGet(client, ts.URL+"/healthz")
		return health.err == nil && health.status == http.StatusOK
	}) {
		t.Fatalf("/healthz 5s after the thaw: %d %s %v", health.status, health.body, health.err)
	}
	t.Logf("frozen for %s; /healthz answered 200 %s after the thaw", frozenFor.Round(time.Millisecond), time.Since(thawedAt).Round(time.Millisecond))

	// The timed-out writes have an unknown outcome: a statement the server
	// had received before it froze may still run when it thaws. Each runs
	// at most once, and the history stays contiguous.
	r := apiGet(client, ts.URL+"/v1/workflows/"+id)
	if r.err != nil || r.status != http.StatusOK {
		t.Fatalf("GET after the thaw: %d %s %v", r.status, r.body, r.err)
	}
	inst, err := st.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if inst.Version > 2 {
		t.Errorf("version %d after two timed-out writes on version 0", inst.Version)
	}
	h := checkHistory(t, st, inst)
	var causes []string
	for _, e := range h[1:] {
		causes = append(causes, e.Cause)
	}
	t.Logf("after the thaw: version %d, status %s, changes %v", inst.Version, inst.Status, causes)
}

// freezer stops and continues the processes of the test's own cluster: its
// postmaster (the parent of a backend of ours) and every process it forked.
type freezer struct {
	t        *testing.T
	pids     []int
	deadMan  *exec.Cmd
	frozen   bool
	postgres int
}

func newFreezer(t *testing.T, admin *pgx.Conn) *freezer {
	t.Helper()
	var backend int
	if err := admin.QueryRow(context.Background(), "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		t.Fatal(err)
	}
	pm := parentPID(backend)
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pm))
	if pm <= 1 || !strings.Contains(string(cmdline), "postgres") {
		t.Skipf("cannot find the postmaster of backend %d (parent %d: %q)", backend, pm, cmdline)
	}
	fz := &freezer{t: t, postgres: pm}
	t.Cleanup(fz.thaw) // before faultCluster's cleanup and the database's
	return fz
}

// parentPID reads the parent of pid from /proc; 0 when unknown.
func parentPID(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "PPid:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// freeze stops the postmaster first (it forks no more), then its children.
// A dead man's switch, in its own session, continues them after 30s should
// this process die first.
func (fz *freezer) freeze() {
	fz.t.Helper()
	if err := syscall.Kill(fz.postgres, syscall.SIGSTOP); err != nil {
		fz.t.Skipf("cannot stop the postmaster: %v", err)
	}
	fz.pids = []int{fz.postgres}
	fz.frozen = true
	entries, err := os.ReadDir("/proc")
	if err != nil {
		fz.t.Fatal(err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || parentPID(pid) != fz.postgres {
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGSTOP); err == nil {
			fz.pids = append(fz.pids, pid)
		}
	}
	var list []string
	for _, pid := range fz.pids {
		list = append(list, strconv.Itoa(pid))
	}
	fz.deadMan = exec.Command("/bin/sh", "-c", "sleep 30; kill -CONT "+strings.Join(list, " "))
	fz.deadMan.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := fz.deadMan.Start(); err != nil {
		fz.thaw()
		fz.t.Fatalf("start the dead man's switch: %v", err)
	}
}

// thaw continues the children, then the postmaster. Idempotent.
func (fz *freezer) thaw() {
	if !fz.frozen {
		return
	}
	fz.frozen = false
	for i := len(fz.pids) - 1; i >= 0; i-- {
		_ = syscall.Kill(fz.pids[i], syscall.SIGCONT)
	}
	if fz.deadMan != nil {
		_ = fz.deadMan.Process.Kill()
		_ = fz.deadMan.Wait()
	}
}
