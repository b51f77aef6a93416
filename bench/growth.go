package bench

import (
	"context"
	"time"
)

// GrowthMeter reads how many bytes the database has written so far
// (internal/dbgrowth.Meter is one): the difference of two readings around
// a run's measured part is what that part wrote.
type GrowthMeter interface {
	Written(ctx context.Context) (int64, error)
	// IsWAL reports whether Written is PostgreSQL's WAL position;
	// otherwise it is the size of SQLite's database files.
	IsWAL() bool
}

// growthScenario is a scenario whose cost per item is reported: items
// says how many items its measured part did, as verify left res.
type growthScenario interface {
	items(res *Result) int64
}

func (f *foreachScenario) items(res *Result) int64 { return res.Ops } // iterations

func (h *historyScenario) items(res *Result) int64 { return res.Ops * int64(h.r.cfg.Steps) } // chain steps

func (q *queueScenario) items(res *Result) int64 { return res.Ops } // drained steps

func (g *codeGrowthScenario) items(res *Result) int64 { return res.Ops * int64(g.r.cfg.Steps) } // checkpoints

// A workflow of the measured part: every one started is completed, those
// the drain waited for included.
func (w *workflowScenario) items(res *Result) int64 { return res.Completed }

// growth measures what the measured part of a growthScenario's run wrote.
type growth struct {
	r       *runner
	sc      growthScenario // nil: the scenario reports no cost per item
	meter   GrowthMeter    // nil: only the time per item is reported
	before  int64
	written int64
	known   bool // written was measured
}

// startGrowth reads cfg.Growth before the measured part of sc; a failed
// reading is logged and leaves the bytes out of the result.
func (r *runner) startGrowth(ctx context.Context, sc scenario) *growth {
	g := &growth{r: r}
	g.sc, _ = sc.(growthScenario)
	if g.sc == nil || r.cfg.Growth == nil {
		return g
	}
	g.meter = r.cfg.Growth
	var err error
	if g.before, err = g.meter.Written(ctx); err != nil {
		r.logf("warning: not measuring the database's growth: %v", err)
		g.meter = nil
	}
	return g
}

// stop reads cfg.Growth after the measured part.
func (g *growth) stop(ctx context.Context) {
	if g.meter == nil {
		return
	}
	after, err := g.meter.Written(ctx)
	if err != nil {
		g.r.logf("warning: not measuring the database's growth: %v", err)
		return
	}
	g.written, g.known = after-g.before, true
}

// report fills in res's cost per item, once verify has filled in the
// rest: the measured part's time, and the bytes it wrote when known,
// divided by the items it did.
func (g *growth) report(res *Result, elapsed time.Duration) {
	if g.sc == nil {
		return
	}
	items := g.sc.items(res)
	if items <= 0 {
		return
	}
	res.MSPerItem = round3(float64(elapsed) / float64(time.Millisecond) / float64(items))
	if !g.known {
		return
	}
	perItem := round3(float64(g.written) / float64(items))
	if g.meter.IsWAL() {
		res.WALBytes, res.WALBytesPerItem = g.written, perItem
	} else {
		res.FileGrowthBytes, res.FileGrowthBytesPerItem = g.written, perItem
	}
}
