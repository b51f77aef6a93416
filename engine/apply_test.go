package engine_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// losingApplies is a store on which every Apply outside a transaction loses
// its race, as it would to a stream of writers that hold the instance's row
// lock (PATCH with If-Match: *); writes inside a transaction go through.
type losingApplies struct {
	store.Backend
	lost atomic.Int64
}

func (s *losingApplies) Apply(_ context.Context, w *store.Write) (*workflow.Instance, error) {
	s.lost.Add(1)
	return nil, &store.ConflictError{ID: w.ID, Expected: w.ExpectedVersion, Actual: w.ExpectedVersion + 1}
}

// An action or an external step completion that keeps losing the race to
// other writers ends by reading under the instance's row lock and writing in
// the same transaction: it succeeds instead of answering a conflict. (On
// SQLite a decision never reads in a transaction: it takes its turn, see
// TestDecisionsTakeTurnsWithLockedWrites.)
func TestActionsEndByWaitingForTheRowLock(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		b := postgresBackend(t)
		losing := &losingApplies{}
		n := newNode(t, b, b.newDB(t), nodeOpts{workers: -1, noStart: true,
			wrap: func(st store.Backend) store.Backend { losing.Backend = st; return losing }})
		ctx := context.Background()
		n.define("name: contended\nsteps:\n  - {id: a, type: wait}\n  - {id: b, type: wait}\n")
		n.start("contended", "w", "")
		paused, err := n.eng.Action(ctx, "w", "pause")
		if err != nil {
			t.Fatalf("pause while every optimistic write loses: %v", err)
		}
		if paused.Status != workflow.StatusPaused || paused.Version != 1 {
			t.Errorf("pause wrote %s at version %d, want PAUSED at 1", paused.Status, paused.Version)
		}
		done, err := n.eng.CompleteStep(ctx, engine.CompleteStepParams{ID: "w", Step: "a", Output: []byte(`"ok"`)})
		if err != nil {
			t.Fatalf("external completion while every optimistic write loses: %v", err)
		}
		if st := done.State.Steps["a"]; st.Status != workflow.StepCompleted || done.Version != 2 {
			t.Errorf("completion wrote step a %s at version %d, want COMPLETED at 2", st.Status, done.Version)
		}
		if losing.lost.Load() == 0 {
			t.Error("no optimistic write was tried: the test did not make the loop lose a race")
		}
		n.checkHistory(done)
	})
}
