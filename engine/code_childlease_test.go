package engine_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/engine/rules"
	"github.com/flowd/flowd/store"
)

// dropChildClaim loses the first claimed task of a child wait: the node
// that claimed it died before it started the child (a SIGKILLed `flowd
// serve`), so the task's lease ends with nobody holding it.
type dropChildClaim struct {
	store.Backend
	dropped atomic.Int64
}

func (s *dropChildClaim) ClaimTasks(ctx context.Context, p store.ClaimParams) ([]store.Claimable, store.HeldBack, error) {
	claimed, held, err := s.Backend.ClaimTasks(ctx, p)
	if err != nil || s.dropped.Load() > 0 {
		return claimed, held, err
	}
	kept := claimed[:0]
	for _, c := range claimed {
		if c.Task.Queue == store.QueueChild && s.dropped.CompareAndSwap(0, 1) {
			continue
		}
		kept = append(kept, c)
	}
	return kept, held, nil
}

// A code workflow's child wait whose task was claimed by a node that died
// before starting the child is claimed again once that lease ends, and
// the child runs: the wait does not fail for a crash that started
// nothing (found by cmd/flowd's TestCodeCrash, SIGKILLing `flowd serve`).
func TestCodeWorkflowChildStartLostWithItsNode(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		greet := func(_ context.Context, task engine.Task) (json.RawMessage, error) {
			var in struct{ Name string }
			_ = json.Unmarshal(task.Input, &in)
			return json.Marshal("hello " + in.Name)
		}
		ds := &dropChildClaim{}
		n := newNode(t, b, b.newDB(t), nodeOpts{lease: time.Second, handlers: map[string]engine.Handler{"greet": greet},
			wrap: func(st store.Backend) store.Backend { ds.Backend = st; return ds }})
		n.define(orderCode)
		n.define("name: greeting\nsteps:\n  - {id: hi, type: task, handler: greet, input: {name: \"{{ .input.name }}\"}}\n")
		w := codeWorker{t: t, n: n}

		n.start("order", "lost-child", `{}`)
		run := w.run(5 * time.Second)
		if err := n.eng.Suspend(t.Context(), run.ID, run.Lease, map[string]rules.Wait{"kid": {Child: "greeting", ChildInput: json.RawMessage(`{"name":"ana"}`)}}); err != nil {
			t.Fatal(err)
		}
		run2 := w.run(15 * time.Second)
		if ds.dropped.Load() != 1 {
			t.Fatalf("%d claims of the child's task were lost, want 1", ds.dropped.Load())
		}
		kid := journal(t, run2)["kid"]
		if out, _ := kid["output"].(map[string]any); kid["status"] != "COMPLETED" || out["hi"] != "hello ana" {
			t.Fatalf("the child wait after its first claim was lost: %v", kid)
		}
		inst, err := n.st.Get(t.Context(), "lost-child")
		if err != nil {
			t.Fatal(err)
		}
		n.checkHistory(inst)
	})
}
