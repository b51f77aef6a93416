package apitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// Many writers on one instance with If-Match: * (and the actions, which
// carry no precondition at all) wait for each other's row lock: none of them
// may be answered 503 or 409 for contention alone. Sixteen writers at once
// are what makes them queue on the lock; eight writes each keep them
// overlapping (20 each only made the run longer, and the step-completion
// case's state, which holds a step per write, quadratically so).
const (
	lockedWriters   = 16
	writesPerWriter = 8
)

func testLockedWriters(t *testing.T, newServer NewServer) {
	a := &api{t: t, url: newServer(t)}
	t.Run("Patch", func(t *testing.T) { testLockedPatches(t, a) })
	t.Run("Actions", func(t *testing.T) { testLockedActions(t, a) })
	t.Run("CompleteStepAndPatch", func(t *testing.T) { testLockedStepCompletions(t, a) })
}

// post sends a request from any goroutine (it reports instead of calling
// t.Fatal); ifMatch "" sends none.
func (a *api) post(method, path, body, ifMatch string) resp {
	req, _ := http.NewRequest(method, a.url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if ifMatch != "" {
		req.Header.Set("If-Match", ifMatch)
	}
	return a.send(req)
}

// testLockedPatches: every writer sets keys of its own, so every PATCH must
// be there at the end and each must have cost exactly one version.
func testLockedPatches(t *testing.T, a *api) {
	expect(t, a.create("locked-patch", `{"variables":{}}`), 201, "create")
	var wg sync.WaitGroup
	for w := range lockedWriters {
		wg.Go(func() {
			for n := range writesPerWriter {
				body := fmt.Sprintf(`{"variables":{"w%d_%d":%d}}`, w, n, n)
				if r := a.post("PATCH", "/v1/workflows/locked-patch", body, "*"); r.status != 200 {
					t.Errorf("PATCH If-Match: * by writer %d: %d %s", w, r.status, r.body)
					return
				}
			}
		})
	}
	wg.Wait()
	var inst struct {
		Version int
		State   struct{ Variables map[string]int }
	}
	a.do("GET", "/v1/workflows/locked-patch", "").json(t, &inst)
	for w := range lockedWriters {
		for n := range writesPerWriter {
			if v, ok := inst.State.Variables[fmt.Sprintf("w%d_%d", w, n)]; !ok || v != n {
				t.Errorf("key w%d_%d is %d (present %v), want %d", w, n, v, ok, n)
			}
		}
	}
	if want := lockedWriters * writesPerWriter; inst.Version != want {
		t.Errorf("version %d after %d PATCHes", inst.Version, want)
	}
}

// testLockedActions: writers toggle pause and resume on one instance. An
// action may find the status it does not apply to (409 saying so); any
// other answer is a failure, and every 200 is exactly one version.
func testLockedActions(t *testing.T, a *api) {
	expect(t, a.create("locked-act", ""), 201, "create")
	expect(t, a.do("POST", "/v1/workflows/locked-act/status", `{"from":"PENDING","to":"RUNNING"}`), 200, "start")
	var ok, refused atomic.Int64
	var wg sync.WaitGroup
	for w := range lockedWriters {
		wg.Go(func() {
			for n := range writesPerWriter {
				action := []string{"pause", "resume"}[(w+n)%2]
				r := a.post("POST", "/v1/workflows/locked-act/"+action, "", "")
				switch {
				case r.status == 200:
					ok.Add(1)
				case r.status == 409 && bytes.Contains(r.body, []byte("cannot "+action+" workflow locked-act: it is ")):
					refused.Add(1)
				default:
					t.Errorf("%s by writer %d: %d %s", action, w, r.status, r.body)
					return
				}
			}
		})
	}
	wg.Wait()
	var inst struct{ Version int64 }
	a.do("GET", "/v1/workflows/locked-act", "").json(t, &inst)
	// Version 1 is the start.
	if inst.Version != ok.Load()+1 {
		t.Errorf("version %d after %d actions that answered 200", inst.Version, ok.Load())
	}
	if ok.Load()+refused.Load() != lockedWriters*writesPerWriter {
		t.Errorf("%d answered 200 and %d 409 of %d", ok.Load(), refused.Load(), lockedWriters*writesPerWriter)
	}
	t.Logf("%d actions answered 200, %d found a status they do not apply to", ok.Load(), refused.Load())
}

// testLockedStepCompletions: half the writers complete steps with
// If-Match: *, the other half PATCH the same instance meanwhile.
func testLockedStepCompletions(t *testing.T, a *api) {
	const completers = lockedWriters / 2
	steps := map[string]any{}
	for w := range completers {
		for n := range writesPerWriter {
			steps[fmt.Sprintf("s%d_%d", w, n)] = map[string]string{"status": "WAITING"}
		}
	}
	state, _ := json.Marshal(map[string]any{"steps": steps})
	expect(t, a.create("locked-steps", string(state)), 201, "create")
	var wg sync.WaitGroup
	for w := range lockedWriters {
		wg.Go(func() {
			for n := range writesPerWriter {
				var r resp
				if w < completers {
					r = a.post("POST", fmt.Sprintf("/v1/workflows/locked-steps/steps/s%d_%d/complete", w, n), fmt.Sprintf(`{"output":%d}`, n), "*")
				} else {
					r = a.post("PATCH", "/v1/workflows/locked-steps", fmt.Sprintf(`{"w%d_%d":true}`, w, n), "*")
				}
				if r.status != 200 {
					t.Errorf("writer %d, write %d: %d %s", w, n, r.status, r.body)
					return
				}
			}
		})
	}
	wg.Wait()
	var inst struct {
		Version int
		State   map[string]json.RawMessage
	}
	a.do("GET", "/v1/workflows/locked-steps", "").json(t, &inst)
	var done map[string]struct {
		Status string
		Output int
	}
	if err := json.Unmarshal(inst.State["steps"], &done); err != nil {
		t.Fatal(err)
	}
	for w := range lockedWriters {
		for n := range writesPerWriter {
			if w < completers {
				if st := done[fmt.Sprintf("s%d_%d", w, n)]; st.Status != "COMPLETED" || st.Output != n {
					t.Errorf("step s%d_%d: %+v", w, n, st)
				}
			} else if string(inst.State[fmt.Sprintf("w%d_%d", w, n)]) != "true" {
				t.Errorf("key w%d_%d missing", w, n)
			}
		}
	}
	if want := lockedWriters * writesPerWriter; inst.Version != want {
		t.Errorf("version %d after %d writes", inst.Version, want)
	}
}
