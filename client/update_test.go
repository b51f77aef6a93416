package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/flowd/flowd/client"
	"github.com/flowd/flowd/workflow"
)

func TestParseETag(t *testing.T) {
	for in, want := range map[string]int64{`"0"`: 0, `"42"`: 42} {
		if got, err := client.ParseETag(in); err != nil || got != want {
			t.Errorf("ParseETag(%s) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{``, `4`, `"4`, `W/"4"`, `"-1"`, `"04"`, `"abc"`, `*`} {
		_, err := client.ParseETag(bad)
		want := fmt.Sprintf(`flowd client: %q is not the ETag of an instance version (want e.g. "4", quotes included)`, bad)
		if err == nil || err.Error() != want {
			t.Errorf("ParseETag(%s) = %v, want %q", bad, err, want)
		}
	}
}

func TestClientVersionHelpers(t *testing.T) {
	t.Parallel()
	b := setupClient(t, nil)
	ctx := t.Context()
	b.create(t, "w", `{"variables":{"a":1},"steps":{"s":{"status":"WAITING"},"t":{"status":"WAITING"}}}`)

	inst, changed, err := b.c.GetWorkflowIfChanged(ctx, "w", 0)
	if err != nil || changed || inst != nil {
		t.Fatalf("unchanged instance: %+v, %v, %v; want nil, false, nil", inst, changed, err)
	}
	if im := b.seen.last().Header.Get("If-None-Match"); im != `"0"` {
		t.Errorf("If-None-Match %q", im)
	}
	inst, err = b.c.PatchWorkflowAt(ctx, "w", 0, json.RawMessage(`{"variables":{"a":2}}`))
	if err != nil || inst.Version != 1 {
		t.Fatalf("PatchWorkflowAt: %+v, %v", inst, err)
	}
	if im := b.seen.last().Header.Get("If-Match"); im != `"0"` {
		t.Errorf("PatchWorkflowAt sent If-Match %q", im)
	}
	_, err = b.c.PatchWorkflowAt(ctx, "w", 0, json.RawMessage(`{}`))
	wantStatus(t, err, 412)

	inst, changed, err = b.c.GetWorkflowIfChanged(ctx, "w", 0)
	if err != nil || !changed || inst.Version != 1 || string(inst.State.Variables["a"]) != "2" {
		t.Fatalf("changed instance: %+v, %v, %v", inst, changed, err)
	}
	_, _, err = b.c.GetWorkflowIfChanged(ctx, "missing", 0)
	wantStatus(t, err, 404)

	inst, err = b.c.CompleteStepAt(ctx, "w", "s", 1, json.RawMessage(`"out"`))
	if err != nil || inst.Version != 2 || inst.State.Steps["s"].Status != workflow.StepCompleted {
		t.Fatalf("CompleteStepAt: %+v, %v", inst, err)
	}
	if im := b.seen.last().Header.Get("If-Match"); im != `"1"` {
		t.Errorf("CompleteStepAt sent If-Match %q", im)
	}
	_, err = b.c.CompleteStepAt(ctx, "w", "t", 1, nil)
	wantStatus(t, err, 412)
}

func TestClientServerErrors(t *testing.T) {
	t.Parallel()
	for _, status := range []int{500, 503} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Request-Id", "r1")
			w.WriteHeader(status)
			fmt.Fprintf(w, `{"error": %q, "message": "database unreachable"}`, http.StatusText(status))
		}))
		_, err := client.New(srv.URL).GetWorkflow(t.Context(), "w")
		srv.Close()
		wantStatus(t, err, status)
	}
}

// counter reads variables.n of inst.
func counter(t *testing.T, inst *workflow.Instance) int {
	var n int
	if _, err := inst.State.Var("n", &n); err != nil {
		t.Error(err)
	}
	return n
}

func increment(t *testing.T) client.MergeFunc {
	return func(inst *workflow.Instance) (json.RawMessage, error) {
		return json.RawMessage(`{"variables":{"n":` + strconv.Itoa(counter(t, inst)+1) + `}}`), nil
	}
}

// Concurrent read-modify-writes of one counter: none is lost.
func TestUpdateWorkflowConcurrentWriters(t *testing.T) {
	t.Parallel()
	b := setupClient(t, nil)
	b.create(t, "w", `{"variables":{"n":0}}`)
	const writers, each = 8, 5
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range each {
				if _, err := b.c.UpdateWorkflow(t.Context(), "w", client.RetryPolicy{MaxAttempts: 100}, increment(t)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	inst, err := b.c.GetWorkflow(t.Context(), "w")
	if err != nil {
		t.Fatal(err)
	}
	if n := counter(t, inst); n != writers*each || inst.Version != writers*each {
		t.Fatalf("counter %d at version %d, want %d at %d: an update was lost", n, inst.Version, writers*each, writers*each)
	}
}

func TestUpdateWorkflowRetries(t *testing.T) {
	t.Parallel()
	b := setupClient(t, nil)
	ctx := t.Context()
	b.create(t, "w", `{"variables":{"n":0}}`)

	// Another writer changes the instance between the read and the patch,
	// twice: the third attempt, from a fresh read, wins.
	var calls atomic.Int32
	inst, err := b.c.UpdateWorkflow(ctx, "w", client.RetryPolicy{}, func(inst *workflow.Instance) (json.RawMessage, error) {
		if calls.Add(1) <= 2 {
			if _, err := b.c.PatchWorkflow(ctx, "w", "*", json.RawMessage(`{"variables":{"other":true}}`)); err != nil {
				return nil, err
			}
		}
		return increment(t)(inst)
	})
	if err != nil || calls.Load() != 3 || counter(t, inst) != 1 || inst.Version != 3 || string(inst.State.Variables["other"]) != "true" {
		t.Fatalf("after two conflicts: %+v, %v, %d calls", inst, err, calls.Load())
	}

	// Always beaten: gives up after MaxAttempts with a 412.
	calls.Store(0)
	_, err = b.c.UpdateWorkflow(ctx, "w", client.RetryPolicy{MaxAttempts: 3}, func(inst *workflow.Instance) (json.RawMessage, error) {
		calls.Add(1)
		if _, err := b.c.PatchWorkflow(ctx, "w", "*", json.RawMessage(`{"variables":{"other":1}}`)); err != nil {
			return nil, err
		}
		return json.RawMessage(`{}`), nil
	})
	if !errors.Is(err, client.ErrPreconditionFailed) || calls.Load() != 3 {
		t.Fatalf("always beaten: %v after %d calls, want ErrPreconditionFailed after 3", err, calls.Load())
	}
	if want := "flowd client: updating workflow w: other writers won all 3 attempts: 412 Precondition Failed: "; len(err.Error()) < len(want) || err.Error()[:len(want)] != want {
		t.Errorf("error %q, want prefix %q", err, want)
	}

	// No patch: nothing written.
	before, _ := b.c.GetWorkflow(ctx, "w")
	inst, err = b.c.UpdateWorkflow(ctx, "w", client.RetryPolicy{}, func(*workflow.Instance) (json.RawMessage, error) { return nil, nil })
	if err != nil || inst.Version != before.Version {
		t.Fatalf("empty patch: %+v, %v; want version %d unchanged", inst, err, before.Version)
	}

	// merge's error, unknown ids and terminal instances end it at once.
	boom := errors.New("boom")
	if _, err := b.c.UpdateWorkflow(ctx, "w", client.RetryPolicy{}, func(*workflow.Instance) (json.RawMessage, error) { return nil, boom }); err != boom {
		t.Errorf("merge error: %v", err)
	}
	calls.Store(0)
	_, err = b.c.UpdateWorkflow(ctx, "missing", client.RetryPolicy{}, func(*workflow.Instance) (json.RawMessage, error) { calls.Add(1); return nil, nil })
	if !errors.Is(err, client.ErrNotFound) || calls.Load() != 0 {
		t.Errorf("unknown id: %v after %d calls", err, calls.Load())
	}
	if _, err := b.c.Action(ctx, "w", "cancel"); err != nil {
		t.Fatal(err)
	}
	_, err = b.c.UpdateWorkflow(ctx, "w", client.RetryPolicy{}, increment(t))
	wantStatus(t, err, 409)
	if _, err := b.c.UpdateWorkflow(ctx, "w", client.RetryPolicy{}, nil); err == nil || err.Error() != "flowd client: UpdateWorkflow needs a merge function" {
		t.Errorf("nil merge: %v", err)
	}
}

// A context that ends during the backoff ends the retries.
func TestUpdateWorkflowHonoursContext(t *testing.T) {
	t.Parallel()
	b := setupClient(t, nil)
	b.create(t, "w", `{}`)
	ctx, cancel := context.WithCancel(t.Context())
	calls := 0
	_, err := b.c.UpdateWorkflow(ctx, "w", client.RetryPolicy{MaxAttempts: 1000, BaseDelay: 1 << 40, MaxDelay: 1 << 40}, func(*workflow.Instance) (json.RawMessage, error) {
		calls++
		if _, err := b.c.PatchWorkflow(ctx, "w", "*", json.RawMessage(`{"variables":{"x":1}}`)); err != nil {
			return nil, err
		}
		cancel() // during the (long) backoff that follows the 412
		return json.RawMessage(`{}`), nil
	})
	if !errors.Is(err, context.Canceled) || calls != 1 {
		t.Fatalf("cancelled: %v after %d calls, want context.Canceled after 1", err, calls)
	}
}
