package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/flowd/flowd/store/sqlite"
	"github.com/flowd/flowd/workflow"
)

// FuzzStatePatch: whatever the body, the PATCH path never panics; a patch it
// accepts yields a valid state, and applying it again changes nothing
// (merge patches are idempotent, RFC 7396).
func FuzzStatePatch(f *testing.F) {
	for _, seed := range []string{
		`{"variables":{"a":1}}`, `{"variables":null}`, `{"steps":{"a":{"status":"COMPLETED","output":{"x":[1,2]}}}}`,
		`{"steps":{"a":null}}`, `{"custom":{"deep":{"k":null}}}`, `{"steps":{"a,b":{}}}`, `{"steps":5}`, `[]`, `{`, `null`,
		`{"variables":{"big":9007199254740993}}`, `{"steps":{"a":{"attempts":-1}}}`,
	} {
		f.Add(seed)
	}
	base, err := workflow.ParseState([]byte(`{"variables":{"n":1,"keep":"x"},"steps":{"a":{"status":"RUNNING","attempts":1},"b":{"status":"PENDING"}},"extra":{"k":[1]}}`))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body string) {
		req := httptest.NewRequest(http.MethodPatch, "/v1/workflows/x", strings.NewReader(body))
		patch, _, err := readMergePatch(req)
		if err != nil {
			if statusFor(err) != http.StatusBadRequest {
				t.Fatalf("rejected patch %q with status %d: %v", body, statusFor(err), err)
			}
			return
		}
		next, err := applyStatePatch(base.Clone(), patch)
		if err != nil {
			if statusFor(err) != http.StatusBadRequest {
				t.Fatalf("applying %q: status %d: %v", body, statusFor(err), err)
			}
			return
		}
		if err := next.Validate(); err != nil {
			t.Fatalf("patch %q produced an invalid state: %v", body, err)
		}
		again, err := applyStatePatch(next.Clone(), patch)
		if err != nil {
			t.Fatalf("re-applying %q failed: %v", body, err)
		}
		a, _ := json.Marshal(next)
		b, _ := json.Marshal(again)
		if !bytes.Equal(a, b) {
			t.Fatalf("patch %q is not idempotent:\n%s\n%s", body, a, b)
		}
	})
}

// FuzzControlBodies: the strict decoder of control bodies never panics and
// answers only 400 or 413 for what it refuses.
func FuzzControlBodies(f *testing.F) {
	for _, seed := range []string{
		`{"from":"RUNNING","to":"PAUSED"}`, `{"from":"RUNNING","to":"NOPE"}`, `{"output":{"a":1}}`,
		`{"status":"RUNNING","updated_before":"2026-01-01T00:00:00Z","new_status":"PAUSED","limit":10}`,
		`{"worker":"w","handlers":["echo"],"wait_seconds":1.5}`, `{"lease":"x","error":"e","retryable":false}`,
		`{"id":"a","state":{"steps":{}}}`, `{} {}`, `{"x":1}`, ``, `[`, `"str"`, `{"limit":1e400}`,
	} {
		f.Add(seed)
	}
	targets := []func() any{
		func() any { return &CreateWorkflowRequest{} }, func() any { return &TransitionRequest{} },
		func() any { return &CompleteStepRequest{} }, func() any { return &BatchStatusRequest{} },
		func() any { return &PollRequest{} }, func() any { return &CompleteTaskRequest{} },
		func() any { return &FailTaskRequest{} }, func() any { return &HeartbeatRequest{} },
	}
	f.Fuzz(func(t *testing.T, body string) {
		for _, newTarget := range targets {
			for _, allowEmpty := range []bool{false, true} {
				req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
				err := decodeControl(req, newTarget(), allowEmpty)
				var ae *apiError
				if err != nil && (!errors.As(err, &ae) || (ae.status != http.StatusBadRequest && ae.status != http.StatusRequestEntityTooLarge)) {
					t.Fatalf("decodeControl(%q) = %v", body, err)
				}
			}
		}
	})
}

// FuzzAPIBodies sends each input, through the real handler on an in-memory
// SQLite store, as the body of POST /v1/workflows, as a merge patch, and as
// the "state", the "input" and a step's "output" of a request. Whatever the
// body, the answer is never a 5xx, and one input does not make the heap grow
// by more than 64 MB: what a hostile body can cost is bounded.
//
// `go test` runs the seeds only; fuzz with
// go test -fuzz=FuzzAPIBodies -fuzztime=60s ./httpapi/
func FuzzAPIBodies(f *testing.F) {
	for _, seed := range []string{
		`{}`, `{"state":{"variables":{"a":1}},"input":{"k":[1,2]}}`, `{"variables":{"a":null,"b":{"c":1}}}`,
		`{"steps":{"s":{"status":"COMPLETED","output":1}}}`, `{"input":[1]}`, `{"id":"x y"}`,
		strings.Repeat("[", 65) + strings.Repeat("]", 65), strings.Repeat(`{"a":`, 64) + `1` + strings.Repeat(`}`, 64),
		"{\"a\":\"\xff\"}", `{"a\u0000":1}`, `{"a":"\\u0000"}`, `{"a":1e999}`, `{"a":9007199254740993}`,
		`{"state":{"steps":{"a,b":{}}}}`, `{"steps":null}`, `null`, `[`, ``, `{"a":1} x`,
	} {
		f.Add(seed)
	}
	st, err := sqlite.Open(context.Background(), "sqlite::memory:", sqlite.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	if _, err := st.Migrate(context.Background()); err != nil {
		f.Fatal(err)
	}
	h, err := NewServer(Config{Store: st})
	if err != nil {
		f.Fatal(err)
	}
	n := 0
	f.Fuzz(func(t *testing.T, body string) {
		n++ // the fuzzing function runs one input at a time in each process
		id := fmt.Sprintf("fz-%d", n)
		requests := []struct{ method, path, body string }{
			{"POST", "/v1/workflows", body},
			{"POST", "/v1/workflows", `{"id":"` + id + `","state":{"steps":{"s":{"status":"WAITING"}}}}`},
			{"PATCH", "/v1/workflows/" + id, body},
			{"POST", "/v1/workflows", `{"state":` + body + `}`},
			{"POST", "/v1/workflows", `{"input":` + body + `}`},
			{"POST", "/v1/workflows/" + id + "/steps/s/complete", `{"output":` + body + `}`},
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for i, r := range requests {
			req := httptest.NewRequest(r.method, r.path, strings.NewReader(r.body))
			req.Host = "localhost" // httptest's example.com is not a name of the server (421)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("If-Match", "*")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code >= 500 {
				t.Fatalf("%s %s %q: %d %s", r.method, r.path, r.body, rec.Code, rec.Body)
			}
			if i == 1 && rec.Code != http.StatusCreated {
				// The fixed create must work, or every answer is a refusal
				// before the bodies are read at all.
				t.Fatalf("creating %s: %d %s", id, rec.Code, rec.Body)
			}
		}
		runtime.ReadMemStats(&after)
		if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 64<<20 {
			t.Fatalf("the heap grew by %d bytes for body %.200q", grew, body)
		}
	})
}
