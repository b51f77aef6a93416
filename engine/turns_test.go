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

// A decision that takes its time (its programs run long) on an instance
// that a stream of locked writes (PATCH with If-Match: *) keeps changing
// still ends, and so do the writes: they take turns. Each decision here is
// slowed down where it gets its rules; without turns, every locked write
// that lands between a decision's read and its write makes it miss, and the
// stream never leaves it a gap.
func TestDecisionsTakeTurnsWithLockedWrites(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{workers: -1, noStart: true})
		engine.SetDecideHook(n.eng, func(ctx context.Context) {
			if ctx.Value(held{}) != nil {
				time.Sleep(20 * time.Millisecond)
			}
		})
		const steps = 5
		var def strings.Builder
		def.WriteString("name: many\nsteps:\n")
		// One step more than are completed: the instance never settles,
		// so the locked writes never find it finished.
		for i := range steps + 1 {
			fmt.Fprintf(&def, "  - {id: s%d, type: wait}\n", i)
		}
		n.define(def.String())
		n.start("many", "contended", "")

		stop := make(chan struct{})
		var patched atomic.Int64
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					_, err := n.eng.ModifyState(context.Background(), "contended", func(inst *workflow.Instance) error {
						if inst.State.Variables == nil {
							inst.State.Variables = map[string]json.RawMessage{}
						}
						inst.State.Variables[fmt.Sprintf("w%d", w)] = json.RawMessage(fmt.Sprint(i))
						return nil
					}, "patch")
					if err != nil {
						t.Errorf("locked write %d of writer %d: %v", i, w, err)
						return
					}
					patched.Add(1)
				}
			})
		}
		decided := 0
		for i := range steps {
			ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), held{}, true), 20*time.Second)
			_, err := n.eng.CompleteStep(ctx, engine.CompleteStepParams{ID: "contended", Step: fmt.Sprintf("s%d", i), Output: json.RawMessage(fmt.Sprint(i))})
			cancel()
			if err != nil {
				t.Errorf("completion of s%d under a stream of locked writes: %v", i, err)
				break
			}
			decided++
		}
		close(stop)
		wg.Wait()
		inst, err := n.st.Get(context.Background(), "contended")
		if err != nil {
			t.Fatal(err)
		}
		for i := range decided {
			if st := inst.State.Steps[fmt.Sprintf("s%d", i)]; st.Status != workflow.StepCompleted || string(st.Output) != fmt.Sprint(i) {
				t.Errorf("step s%d: %s with output %s, want COMPLETED with %d", i, st.Status, st.Output, i)
			}
		}
		// Version 0 is the start; every write is one version.
		if want := patched.Load() + int64(decided); inst.Version != want {
			t.Errorf("version %d after %d locked writes and %d completions", inst.Version, patched.Load(), decided)
		}
		n.checkHistory(inst)
		t.Logf("%d completions beside %d locked writes", decided, patched.Load())
	})
}
