package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/store"
)

// TestExpiredLeaseIsFencedBeforeTheSweep: a lease that ran out is lost at
// once, before any sweep re-queues its task: its holder can neither
// complete, fail nor renew it, and the row stays as the delivery left it
// for the expiry to take. The write would find the row unchanged (nothing
// moved it): only the decision on the row read fences the holder off.
func TestExpiredLeaseIsFencedBeforeTheSweep(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{workers: -1, noSweeps: true})
		n.define(`{"name": "one", "steps": [{"id": "a", "type": "task", "handler": "remote", "retry": {"max_attempts": 3}}]}`)
		n.start("one", "expired-1", "")
		ctx := context.Background()
		task, err := n.eng.Poll(ctx, engine.PollParams{Worker: "w1", Handlers: []string{"remote"}, Lease: 100 * time.Millisecond})
		if err != nil || task == nil {
			t.Fatalf("poll: %+v, %v", task, err)
		}
		time.Sleep(time.Until(task.LeaseUntil) + 10*time.Millisecond)
		err = n.eng.CompleteTask(ctx, task.ID, task.Lease, json.RawMessage(`"late"`))
		if !errors.Is(err, engine.ErrLeaseLost) || !strings.Contains(err.Error(), "expired at") {
			t.Errorf("completion under an expired lease: %v, want ErrLeaseLost (expired)", err)
		}
		if err := n.eng.FailTask(ctx, task.ID, task.Lease, "late", true); !errors.Is(err, engine.ErrLeaseLost) {
			t.Errorf("failure under an expired lease: %v, want ErrLeaseLost", err)
		}
		if _, err := n.eng.Heartbeat(ctx, task.ID, task.Lease, time.Minute); !errors.Is(err, engine.ErrLeaseLost) {
			t.Errorf("heartbeat under an expired lease: %v, want ErrLeaseLost", err)
		}
		row, err := n.st.Task(ctx, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if row.Status != store.TaskLeased || row.Lease != task.Lease || row.Attempt != 1 {
			t.Errorf("the task after the fenced writes: %+v, want LEASED under %q, attempt 1", row, task.Lease)
		}
	})
}
