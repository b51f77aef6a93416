package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

const remoteAndEachDef = `
name: remote-and-each
steps:
  - {id: call, type: task, handler: remote, retry: {max_attempts: 3, initial_backoff: 10ms, max_backoff: 20ms}}
  - {id: each, type: task, handler: local, foreach: .input, input: '{{ .item }}'}
`

// TestStoredAttemptsNeverGoDown: a step's attempt in flight on a remote
// worker is shown by a read (GetWithAttemptsInFlight) but counted by the
// stored state only from the version that ends it. The writes of another
// step's iterations, completed in process while the attempt runs, must not
// store the attempt a read showed: across the history every step's
// attempts never go down, and the last version agrees with the stored
// state that the attempt's end is decided on.
func TestStoredAttemptsNeverGoDown(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		release := make(chan struct{})
		local := func(ctx context.Context, task engine.Task) (json.RawMessage, error) {
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return task.Input, nil
		}
		n := newNode(t, b, b.newDB(t), nodeOpts{handlers: map[string]engine.Handler{"local": local}, noSweeps: true})
		n.define(remoteAndEachDef)
		const items = 12
		input, _ := json.Marshal(make([]int, items))
		n.start("remote-and-each", "r-1", string(input))

		pollRemote := func() *engine.Task {
			t.Helper()
			task, err := n.eng.Poll(ctx, engine.PollParams{Worker: "w", Handlers: []string{"remote"}, Lease: time.Minute, Wait: 5 * time.Second})
			if err != nil || task == nil {
				t.Fatalf("poll: %v, %v", task, err)
			}
			return task
		}
		first := pollRemote()
		if err := n.eng.FailTask(ctx, first.ID, first.Lease, "boom", true); err != nil {
			t.Fatal(err)
		}
		second := pollRemote()
		if second.Attempt != 2 {
			t.Fatalf("second poll leased attempt %d, want 2", second.Attempt)
		}
		// call's attempt 2 runs on the remote worker; the iterations
		// complete in process.
		close(release)
		deadline := time.Now().Add(10 * time.Second)
		for {
			inst, err := n.st.Get(ctx, "r-1")
			if err != nil {
				t.Fatal(err)
			}
			if inst.State.Steps["each"].Status == workflow.StepCompleted {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("each is %s after 10s", inst.State.Steps["each"].Status)
			}
			time.Sleep(20 * time.Millisecond)
		}
		shown, err := n.st.GetWithAttemptsInFlight(ctx, "r-1")
		if err != nil {
			t.Fatal(err)
		}
		if got := shown.State.Steps["call"].Attempts; got != 2 {
			t.Errorf("call as shown while attempt 2 runs: attempts %d, want 2", got)
		}
		inst, err := n.st.Get(ctx, "r-1")
		if err != nil {
			t.Fatal(err)
		}
		checkAttemptsHistory(t, n, inst, 1)

		if err := n.eng.CompleteTask(ctx, second.ID, second.Lease, json.RawMessage(`"ok"`)); err != nil {
			t.Fatal(err)
		}
		done := n.waitStatus("r-1", workflow.StatusCompleted, 10*time.Second)
		checkAttemptsHistory(t, n, done, 2)
	})
}

// checkAttemptsHistory asserts that no step's attempts go down from one
// version of inst's history to the next, that the last version's records
// are inst's (as stored), and that call's attempts there are wantCall.
func checkAttemptsHistory(t *testing.T, n *node, inst *workflow.Instance, wantCall int) {
	t.Helper()
	h := n.checkHistory(inst)
	seen := map[string]int{}
	var trail []string
	for _, e := range h {
		trail = append(trail, fmt.Sprintf("v%d call=%d (%s)", e.Version, attemptsOf(e, "call"), e.Cause))
		for id, s := range e.State.Steps {
			if s.Attempts < seen[id] {
				t.Errorf("version %d (%s): step %s attempts %d, after %d", e.Version, e.Cause, id, s.Attempts, seen[id])
			}
			seen[id] = s.Attempts
		}
	}
	last := h[len(h)-1]
	for id, s := range inst.State.Steps {
		if got := attemptsOf(last, id); got != s.Attempts {
			t.Errorf("step %s: %d attempts in the last version %d, %d as stored", id, got, inst.Version, s.Attempts)
		}
	}
	if got := attemptsOf(last, "call"); got != wantCall {
		t.Errorf("call's attempts in the last version %d: %d, want %d", inst.Version, got, wantCall)
	}
	if t.Failed() {
		t.Logf("history of call:\n%s", fmt.Sprint(trail))
	}
}

func attemptsOf(e store.HistoryEntry, step string) int {
	if s := e.State.Steps[step]; s != nil {
		return s.Attempts
	}
	return -1
}
