package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// batchScenario: a table of cfg.Rows RUNNING instances; half the clients move
// cfg.BatchSize of them RUNNING→PAUSED per call, the other half PAUSED→RUNNING
// (a single client alternates). An op is a call that moved at least one row.
//
// A batch (the engine's BatchStatus, each instance read and written with
// the guarded write) selects by status across the whole database, so the
// scenario refuses a database holding RUNNING or PAUSED instances it did not
// create, and cancels its rows when it is done.
type batchScenario struct {
	r       *runner
	eng     *engine.Engine
	ids     []string
	index   map[string]int // read-only during the run
	forward []atomic.Int32 // per row: times returned by RUNNING→PAUSED
	back    []atomic.Int32 // per row: times returned by PAUSED→RUNNING

	moved        atomic.Int64
	duplicates   atomic.Int64 // ids one call returned twice
	foreign      atomic.Int64 // ids returned that this run did not create
	unknownCalls atomic.Int64 // calls that failed other than by a conflict
	final        map[string]workflow.Status
	lostLog      mismatches
}

// benchIDPrefix starts the id of every instance flowd bench creates.
const benchIDPrefix = "bench-"

func (b *batchScenario) prepare(ctx context.Context) error {
	b.lostLog.r = b.r
	eng, err := engine.New(engine.Config{Store: b.r.s, Logger: slog.New(slog.DiscardHandler), Workers: &b.r.cfg.Workers})
	if err != nil {
		return err
	}
	b.eng = eng
	if err := b.clearTable(ctx); err != nil {
		return err
	}
	n := b.r.cfg.Rows
	b.ids = make([]string, n)
	b.index = make(map[string]int, n)
	for i := range b.ids {
		b.ids[i] = fmt.Sprintf("%sb%07d", b.r.prefix, i)
		b.index[b.ids[i]] = i
	}
	b.forward = make([]atomic.Int32, n)
	b.back = make([]atomic.Int32, n)
	state := workflow.State{Variables: map[string]json.RawMessage{"row": json.RawMessage(`true`)}}
	return b.r.createMany(ctx, n, func(i int) store.CreateParams {
		return store.CreateParams{ID: b.ids[i], Status: workflow.StatusRunning, State: state, Cause: "bench prepare"}
	})
}

// clearTable makes sure the batches will only see this run's rows: it cancels
// the RUNNING and PAUSED rows an earlier, interrupted bench run left behind,
// and refuses to go on when others exist.
func (b *batchScenario) clearTable(ctx context.Context) error {
	counts, err := store.CountByStatus(ctx, b.r.s)
	if err != nil {
		return err
	}
	if counts[workflow.StatusRunning]+counts[workflow.StatusPaused] == 0 {
		return nil
	}
	var stale []idStatus
	foreign, example := 0, ""
	for _, st := range []workflow.Status{workflow.StatusRunning, workflow.StatusPaused} {
		err := listAll(ctx, b.r.s, st, func(inst *workflow.Instance) {
			if strings.HasPrefix(inst.ID, benchIDPrefix) {
				stale = append(stale, idStatus{inst.ID, inst.Status})
			} else if foreign++; example == "" {
				example = inst.ID
			}
		})
		if err != nil {
			return err
		}
	}
	if foreign > 0 {
		return fmt.Errorf("the batch scenario moves every RUNNING and PAUSED instance of the database, and %d of them (e.g. %q) were not created by flowd bench: run it on a database of its own", foreign, example)
	}
	b.r.logf("batch: cancelling %d RUNNING/PAUSED instances left by an earlier bench run", len(stale))
	return b.r.cancelAll(ctx, stale)
}

type idStatus struct {
	id     string
	status workflow.Status
}

// listAll calls fn for every instance of status st.
func listAll(ctx context.Context, s store.Backend, st workflow.Status, fn func(*workflow.Instance)) error {
	cursor := ""
	for {
		page, err := s.List(ctx, store.ListParams{Status: st, Limit: store.MaxListLimit, Cursor: cursor})
		if err != nil {
			return err
		}
		for _, inst := range page.Instances {
			fn(inst)
		}
		if page.NextCursor == "" {
			return nil
		}
		cursor = page.NextCursor
	}
}

// cancelAll moves the instances to CANCELLED, many per group write.
func (r *runner) cancelAll(ctx context.Context, rows []idStatus) error {
	const perTx = 500
	return r.forEach(ctx, (len(rows)+perTx-1)/perTx, func(chunk int) error {
		var ws []*store.Write
		for _, row := range rows[chunk*perTx : min((chunk+1)*perTx, len(rows))] {
			inst, err := r.s.Get(ctx, row.id)
			if err == nil && inst.Status != row.status {
				err = &store.StatusMismatchError{ID: row.id, Expected: row.status, Actual: inst.Status}
			}
			if err != nil {
				return fmt.Errorf("cancelling %s: %w", row.id, err)
			}
			ws = append(ws, &store.Write{ID: row.id, ExpectedVersion: inst.Version, From: inst.Status,
				Status: workflow.StatusCancelled, State: inst.State, Deadline: inst.Deadline, Cause: "bench cleanup"})
		}
		if _, _, err := r.s.ApplyGroup(ctx, nil, ws, nil); err != nil {
			return fmt.Errorf("cancelling: %w", err)
		}
		return nil
	})
}

func (b *batchScenario) client(ctx context.Context, c *client) {
	forward := c.id%2 == 0
	for c.running() {
		p := store.BatchStatusParams{
			Status: workflow.StatusRunning, NewStatus: workflow.StatusPaused,
			UpdatedBefore: time.Now().Add(time.Hour), Limit: b.r.cfg.BatchSize, Cause: "bench batch",
		}
		what := "RUNNING→PAUSED"
		if !forward {
			p.Status, p.NewStatus, what = workflow.StatusPaused, workflow.StatusRunning, "PAUSED→RUNNING"
		}
		var ids []string
		err := c.do("batch", what, func() error {
			var err error
			ids, err = b.eng.BatchStatus(ctx, p)
			if err == nil && len(ids) == 0 {
				return errEmpty
			}
			return err
		})
		switch {
		case err == nil:
			b.record(ids, forward)
		case errors.Is(err, errEmpty):
			time.Sleep(time.Millisecond) // let the other direction refill
		default:
			b.unknownCalls.Add(1)
		}
		if b.r.cfg.Clients == 1 {
			forward = !forward
		}
	}
}

func (b *batchScenario) record(ids []string, forward bool) {
	b.moved.Add(int64(len(ids)))
	seen := make(map[string]struct{}, len(ids))
	for _, id := range ids {
		if _, dup := seen[id]; dup {
			b.duplicates.Add(1)
			b.lostLog.report("batch: one call returned %s twice", id)
			continue
		}
		seen[id] = struct{}{}
		i, ok := b.index[id]
		if !ok {
			b.foreign.Add(1)
			b.r.logf("batch: moved %s, which this run did not create", id)
			continue
		}
		if forward {
			b.forward[i].Add(1)
		} else {
			b.back[i].Add(1)
		}
	}
}

// verify: every row's version counts the times a batch returned it, and its
// status follows from them: moved forward as often as back and RUNNING, or
// once more forward and PAUSED. An id returned by two batches of one
// direction in one round breaks both. A failed call may have moved rows
// nobody recorded: up to BatchSize rows per such call may be one move ahead.
func (b *batchScenario) verify(ctx context.Context, res *Result) error {
	res.Instances = len(b.ids)
	res.BatchSize = b.r.cfg.BatchSize
	res.RowsMoved = b.moved.Load()
	if res.DurationS > 0 {
		res.RowsPerSec = round3(float64(res.RowsMoved) / res.DurationS)
	}
	res.EmptyBatches = b.r.empty.Load()

	b.final = make(map[string]workflow.Status, len(b.ids))
	version := make(map[string]int64, len(b.ids))
	for _, st := range []workflow.Status{workflow.StatusRunning, workflow.StatusPaused} {
		err := listAll(ctx, b.r.s, st, func(inst *workflow.Instance) {
			if _, ours := b.index[inst.ID]; ours {
				b.final[inst.ID], version[inst.ID] = inst.Status, inst.Version
			}
		})
		if err != nil {
			return err
		}
	}
	m := &b.lostLog
	lost := b.duplicates.Load() + b.foreign.Load()
	budget := b.unknownCalls.Load() * int64(b.r.cfg.BatchSize)
	for i, id := range b.ids {
		st, ok := b.final[id]
		if !ok {
			lost++
			m.report("batch: row %s is neither RUNNING nor PAUSED", id)
			continue
		}
		fwd, bck := int64(b.forward[i].Load()), int64(b.back[i].Load())
		ahead := version[id] - (fwd + bck)
		if ahead == 1 && budget > 0 {
			budget-- // moved by a call whose answer was lost
			if st == workflow.StatusPaused {
				fwd++
			} else {
				bck++
			}
			ahead = 0
		}
		want := workflow.StatusRunning
		if fwd-bck == 1 {
			want = workflow.StatusPaused
		}
		if ahead != 0 || fwd-bck < 0 || fwd-bck > 1 || st != want {
			lost += max(abs(ahead), 1)
			m.report("batch: row %s is %s at version %d, returned %d times RUNNING→PAUSED and %d times back", id, st, version[id], fwd, bck)
		}
	}
	res.LostUpdates = lost
	return nil
}

// close cancels this run's rows, so that the next batch run finds a clean
// table and no RUNNING row is left for an engine to trip over.
func (b *batchScenario) close() {
	if b.final == nil {
		return
	}
	rows := make([]idStatus, 0, len(b.final))
	for id, st := range b.final {
		rows = append(rows, idStatus{id, st})
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(b.r.ctx), 2*time.Minute)
	defer cancel()
	t0 := time.Now()
	if err := b.r.cancelAll(ctx, rows); err != nil {
		b.r.logf("batch: cleaning up: %v (the next batch run cancels what is left)", err)
		return
	}
	b.r.logf("batch: cancelled the run's %d rows in %s", len(rows), time.Since(t0).Round(time.Millisecond))
}
