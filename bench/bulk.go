package bench

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// bulkScenario: cfg.Rows RUNNING instances (not timed), then one bulk
// cancel of them, worked off by an in-process engine's bulk worker as a
// node's sweeper works it (engine.WorkBulk). An op is an instance the
// operation cancelled: ops_per_sec is instances per second; there is one
// latency, the whole operation's. --clients and --duration do not apply:
// the run ends when the operation has.
type bulkScenario struct {
	r    *runner
	eng  *engine.Engine
	ids  []string
	op   atomic.Pointer[store.BulkOperation]
	kept string // the id prefix of the run's instances
}

func (b *bulkScenario) prepare(ctx context.Context) error {
	none := 0
	eng, err := engine.New(engine.Config{Store: b.r.s, Logger: slog.New(slog.DiscardHandler), Workers: &none})
	if err != nil {
		return err
	}
	b.eng = eng
	b.kept = b.r.prefix + "k"
	b.ids = make([]string, b.r.cfg.Rows)
	for i := range b.ids {
		b.ids[i] = fmt.Sprintf("%s%07d", b.kept, i)
	}
	return b.r.createMany(ctx, len(b.ids), func(i int) store.CreateParams {
		return store.CreateParams{ID: b.ids[i], Status: workflow.StatusRunning, Cause: "bench prepare"}
	})
}

func (b *bulkScenario) client(ctx context.Context, c *client) {
	if c.id != 0 {
		return
	}
	var op *store.BulkOperation
	err := c.do("bulk", b.kept, func() error {
		var err error
		op, err = b.eng.CreateBulk(store.WithActor(ctx, "flowd-bench"), engine.BulkParams{Action: "cancel", Filter: store.BulkFilter{IDPrefix: b.kept}})
		if err != nil {
			return err
		}
		for op.Status == store.BulkRunning {
			if err := b.eng.WorkBulk(ctx); err != nil {
				return err
			}
			if op, err = b.eng.GetBulk(ctx, op.ID); err != nil {
				return err
			}
			b.r.logf("bulk: operation %s %s, %d instances cancelled", op.ID, op.Status, op.Done)
		}
		return nil
	})
	if err == nil {
		b.op.Store(op)
		// The one timed operation stands for the instances it cancelled.
		c.r.ops.Add(int64(op.Done) - 1)
	}
}

// verify: the operation is DONE with every instance done, and each
// instance is CANCELLED by one write (version 1) of the operation.
func (b *bulkScenario) verify(ctx context.Context, res *Result) error {
	res.Instances = len(b.ids)
	m := &mismatches{r: b.r}
	op := b.op.Load()
	var lost atomic.Int64
	if op == nil || op.Status != store.BulkDone || op.Done != len(b.ids) || op.Matched != len(b.ids) {
		lost.Add(1)
		m.report("bulk: the operation is %+v, want DONE with %d done", op, len(b.ids))
	}
	err := b.r.forEach(ctx, len(b.ids), func(i int) error {
		inst, err := b.r.s.Get(ctx, b.ids[i])
		if err != nil {
			return err
		}
		if inst.Status != workflow.StatusCancelled || inst.Version != 1 {
			lost.Add(1)
			m.report("bulk: %s is %s at version %d, want CANCELLED at 1", inst.ID, inst.Status, inst.Version)
		}
		return nil
	})
	res.LostUpdates = lost.Load()
	return err
}

func (b *bulkScenario) close() {}
