package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/workflow"
)

// Two engines on one PostgreSQL database: the parents' steps start their
// children on either node, and only node B runs the children's task. Each
// child's completion on B completes its parent's step exactly once —
// while both nodes run and sweep all along — and every
// history, parents' and children's, has contiguous versions.
func TestMultiNodeChildCompletion(t *testing.T) {
	b := postgresBackend(t)
	addr := b.newDB(t)
	var onB atomic.Int64
	a := newNode(t, b, addr, nodeOpts{})
	bn := newNode(t, b, addr, nodeOpts{handlers: map[string]engine.Handler{
		"only-b": func(_ context.Context, task engine.Task) (json.RawMessage, error) {
			onB.Add(1)
			return task.Input, nil
		},
	}})
	a.define("name: part\nsteps:\n  - {id: work, type: task, handler: only-b, input: {n: \"{{ .input.n }}\"}}\n")
	a.define("name: whole\nsteps:\n  - {id: sub, type: workflow, definition: part, input: {n: \"{{ .input.n }}\"}}\n")
	ctx, cancel := context.WithCancel(context.Background())
	var sweeps sync.WaitGroup
	for _, n := range []*node{a, bn} {
		sweeps.Go(func() {
			for ctx.Err() == nil {
				_ = n.eng.Sweep(ctx)
			}
		})
	}
	const parents = 12
	var ids []string
	for i := range parents {
		id := fmt.Sprintf("whole-%d", i)
		starter := a
		if i%2 == 1 {
			starter = bn
		}
		starter.start("whole", id, fmt.Sprintf(`{"n": %d}`, i))
		ids = append(ids, id)
	}
	for _, id := range ids {
		a.waitStatus(id, workflow.StatusCompleted, 30*time.Second)
	}
	cancel()
	sweeps.Wait()
	for i, id := range ids {
		done := a.waitStatus(id, workflow.StatusCompleted, time.Second)
		if got, want := output(t, done, "sub"), fmt.Sprintf(`{"work":{"n":%d}}`, i); got != want {
			t.Errorf("%s: sub output %s, want %s", id, got, want)
		}
		completions := 0
		for _, e := range a.checkHistory(done) {
			if strings.Contains(e.Cause, `step "sub" completed`) {
				completions++
			}
		}
		if completions != 1 {
			t.Errorf("%s: step sub completed %d times", id, completions)
		}
		kids := a.children(id)
		if len(kids) != 1 || kids[0].Status != workflow.StatusCompleted {
			t.Fatalf("%s: children %v", id, kids)
		}
		bn.checkHistory(kids[0])
	}
	if n := onB.Load(); n != parents {
		t.Errorf("node B ran %d child tasks, want %d", n, parents)
	}
}
