package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/workflow"
)

// The foreach scenario's definition: one task step over cfg.Items items
// whose handler outputs the iteration's index, so that the step's output
// says whether every iteration's output is there once, in item order.
const (
	foreachDefName = "flowd-bench-foreach"
	foreachStep    = "each"
	foreachHandler = "flowd-bench-index"
)

func foreachDefinition(items int) string {
	return fmt.Sprintf(`{"name": %q, "steps": [{"id": %q, "type": "task", "handler": %q, "foreach": "[range(%d)]", "input": "{{ .index }}"}]}`,
		foreachDefName, foreachStep, foreachHandler, items)
}

// foreachScenario: an in-process engine with cfg.Workers workers runs
// workflows of one foreach step over cfg.Items items; each client starts
// one, waits for it to end and starts the next. An op is an iteration of a
// workflow that completed (ops_per_sec: iterations per second); a latency
// is a whole workflow's. A workflow in flight when the duration ends is
// waited for and counted.
type foreachScenario struct {
	r       *runner
	eng     *engine.Engine
	seq     atomic.Int64
	mu      sync.Mutex
	started []string
	// noIndex counts handler calls whose task lacked its index.
	noIndex atomic.Int64
}

func (f *foreachScenario) prepare(ctx context.Context) error {
	eng, err := f.r.newEngine(ctx, foreachHandler, f.handle, foreachDefName, foreachDefinition(f.r.cfg.Items))
	if err != nil {
		return err
	}
	if err := eng.Start(ctx); err != nil {
		return err
	}
	f.eng = eng
	return nil
}

// handle outputs the iteration's index.
func (f *foreachScenario) handle(_ context.Context, t engine.Task) (json.RawMessage, error) {
	if t.Index == nil {
		f.noIndex.Add(1)
		return json.RawMessage("null"), nil
	}
	return json.RawMessage(strconv.Itoa(*t.Index)), nil
}

func (f *foreachScenario) client(ctx context.Context, c *client) {
	for c.running() {
		id := fmt.Sprintf("%sf%06d", f.r.prefix, f.seq.Add(1)-1)
		t0 := time.Now()
		if _, err := f.eng.StartWorkflow(ctx, engine.StartParams{ID: id, Definition: foreachDefName}); err != nil {
			f.r.classify("start", id, err)
			continue
		}
		f.mu.Lock()
		f.started = append(f.started, id)
		f.mu.Unlock()
		for ctx.Err() == nil {
			inst, err := f.r.s.Get(ctx, id)
			if err != nil {
				f.r.classify("get", id, err)
				return
			}
			if inst.Status == workflow.StatusCompleted {
				c.lat = append(c.lat, time.Since(t0))
				f.r.ops.Add(int64(f.r.cfg.Items))
				break
			}
			if inst.Status.Terminal() || inst.Status == workflow.StatusFailed {
				break // verify reports it
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// verify reads every started workflow: it must be COMPLETED, its step's
// output the indexes 0…Items-1 in order (every iteration's output there
// exactly once), and its history versions 0…current with no gap.
// lost_updates counts the workflows that are not.
func (f *foreachScenario) verify(ctx context.Context, res *Result) error {
	f.eng.Stop()
	f.eng = nil
	m := &mismatches{r: f.r}
	var broken, completed atomic.Int64
	err := f.r.forEach(ctx, len(f.started), func(i int) error {
		inst, err := f.r.s.Get(ctx, f.started[i])
		if err != nil {
			return err
		}
		if inst.Status != workflow.StatusCompleted {
			broken.Add(1)
			m.report("workflow %s is %s at version %d", inst.ID, inst.Status, inst.Version)
			return nil
		}
		var out []int
		st := inst.State.Steps[foreachStep]
		if err := json.Unmarshal(st.Output, &out); err != nil || len(out) != f.r.cfg.Items {
			broken.Add(1)
			m.report("workflow %s: the output of %d iterations is not an array of %d (%v)", inst.ID, len(out), f.r.cfg.Items, err)
			return nil
		}
		for j, v := range out {
			if v != j {
				broken.Add(1)
				m.report("workflow %s: output %d is %d, want the iteration's index", inst.ID, j, v)
				return nil
			}
		}
		h, err := f.r.s.History(ctx, inst.ID, 0, 0)
		if err != nil {
			return err
		}
		gap := int64(len(h)) != inst.Version+1
		for v, e := range h {
			gap = gap || e.Version != int64(v)
		}
		if gap {
			broken.Add(1)
			m.report("workflow %s at version %d has a history of %d rows that is not 0…%d", inst.ID, inst.Version, len(h), inst.Version)
			return nil
		}
		completed.Add(1)
		return nil
	})
	if err != nil {
		return err
	}
	if n := f.noIndex.Load(); n > 0 {
		broken.Add(n)
		m.report("%d tasks reached the handler without their iteration's index", n)
	}
	res.Workers = f.r.cfg.Workers
	res.Items = f.r.cfg.Items
	res.Started = int64(len(f.started))
	res.Completed = completed.Load()
	res.LostUpdates = broken.Load()
	return nil
}

func (f *foreachScenario) close() {
	if f.eng != nil {
		f.eng.Stop()
	}
}
