package engine_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/engine/rules"
	"github.com/flowd/flowd/workflow"
)

// Two engines on one PostgreSQL database sweep the same cancel cascade at
// once, each as fast as it can: every child is cancelled exactly once (one
// CANCELLED version after its RUNNING one, with the cascade's cause), and
// none is left running.
func TestMultiNodeCancelCascade(t *testing.T) {
	b := postgresBackend(t)
	addr := b.newDB(t)
	a := newNode(t, b, addr, nodeOpts{})
	bn := newNode(t, b, addr, nodeOpts{})
	a.define(leafDef)
	a.define(holdDef)
	top := a.start("hold", "top", "")
	kids := a.makeChildren(top.ID, 2000, false)
	ctx, cancel := context.WithCancel(context.Background())
	var sweeps sync.WaitGroup
	for _, n := range []*node{a, bn} {
		sweeps.Go(func() {
			for ctx.Err() == nil {
				_ = n.eng.Sweep(ctx)
			}
		})
	}
	if _, err := bn.eng.Action(context.Background(), top.ID, "cancel"); err != nil {
		t.Fatal(err)
	}
	a.waitNoneRunning(15 * time.Second)
	cancel()
	sweeps.Wait()
	for _, id := range kids {
		h, err := a.st.History(context.Background(), id, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(h) != 2 || h[0].Status != workflow.StatusRunning || h[1].Status != workflow.StatusCancelled || h[1].Cause != rules.AbandonedCause {
			t.Fatalf("history of %s: %+v", id, h)
		}
	}
}
