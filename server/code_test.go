package server_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/server"
	"github.com/flowd/flowd/worker"
	"github.com/flowd/flowd/workflow"
)

// A code workflow registered in process on an embedded server runs its
// runs here, recording steps, a sleep and an event wait through the engine;
// each step's function runs once, over three runs.
func TestRegisteredWorkflowRunsInProcess(t *testing.T) {
	forEachDB(t, func(t *testing.T, db string) {
		s, err := server.New(t.Context(), server.Config{DB: db, Addr: "127.0.0.1:0"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		var mu sync.Mutex
		effects, runs := map[string]int{}, 0
		fn := worker.Func(func(wf *worker.WorkflowContext, in struct{ N int }) (int, error) {
			mu.Lock()
			runs++
			mu.Unlock()
			double, err := worker.Step(wf, "double", func(ctx context.Context) (int, error) {
				mu.Lock()
				effects[worker.IdempotencyKey(ctx)]++
				mu.Unlock()
				return 2 * in.N, nil
			})
			if err != nil {
				return 0, err
			}
			if err := wf.Sleep("nap", 100*time.Millisecond); err != nil {
				return 0, err
			}
			extra, err := worker.WaitForEvent[int](wf, "extra", "bonus", worker.WithKey(wf.WorkflowID()))
			return double + extra, err
		})
		if err := s.RegisterWorkflow(t.Context(), "calc", worker.Workflow{Run: fn}); err != nil {
			t.Fatal(err)
		}
		if err := s.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		eng := s.Engine()
		if _, err := eng.StartWorkflow(t.Context(), engine.StartParams{ID: "c1", Definition: "calc", Input: json.RawMessage(`{"N": 21}`)}); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			inst, err := s.Store().Get(t.Context(), "c1")
			if err != nil {
				t.Fatal(err)
			}
			if st := inst.State.Steps["extra"]; st != nil && st.Status == workflow.StepWaiting {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("c1 never waited for its event: %s, %v", inst.Status, inst.State.Steps)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if _, err := eng.PublishEvent(t.Context(), "bonus", "c1", json.RawMessage(`8`)); err != nil {
			t.Fatal(err)
		}
		for {
			inst, err := s.Store().Get(t.Context(), "c1")
			if err != nil {
				t.Fatal(err)
			}
			if inst.Status == workflow.StatusCompleted {
				if string(inst.Output) != `50` {
					t.Errorf("output %s, want 50", inst.Output)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("c1 is %s", inst.Status)
			}
			time.Sleep(10 * time.Millisecond)
		}
		mu.Lock()
		defer mu.Unlock()
		if effects["c1/double"] != 1 || runs != 3 {
			t.Errorf("double ran %d times over %d runs, want once over 3", effects["c1/double"], runs)
		}
	})
}
