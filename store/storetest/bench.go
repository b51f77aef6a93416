package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// RunBenchmarks runs the store benchmarks against the backend h describes, as
// sub-benchmarks of b.Run(h.Name, …). Each prepares its data outside the timer
// and keeps it across the benchmark's rounds; the database lives as long as
// the h.Name benchmark.
func RunBenchmarks(b *testing.B, h Harness) {
	b.Run(h.Name, func(b *testing.B) {
		owner := b
		for _, bm := range []struct {
			name string
			fn   func(b *testing.B, f *benchFixture)
		}{
			{"UpdateState_uncontended", benchUpdateStateUncontended},
			{"UpdateState_contended", benchUpdateStateContended},
			{"UpdateState_contended_retry", benchUpdateStateContendedRetry},
			{"CompleteStep", benchCompleteStep},
			{"BatchUpdateStatus", benchBatchUpdateStatus},
		} {
			f := &benchFixture{h: h, owner: owner}
			b.Run(bm.name, func(b *testing.B) { bm.fn(b, f) })
		}
	})
}

// benchFixture is the data of one benchmark, kept across its rounds (the
// testing package calls a benchmark function several times with growing b.N
// and runs its cleanups after each call).
type benchFixture struct {
	h     Harness
	owner *testing.B // outlives every round: owns the database
	s     store.Backend
	data  any
}

// longLived reports failures to the running round but registers cleanups and
// temporary directories with the owner, so the database survives the round.
type longLived struct {
	testing.TB
	owner testing.TB
}

func (l longLived) Cleanup(f func())         { l.owner.Cleanup(f) }
func (l longLived) TempDir() string          { return l.owner.TempDir() }
func (l longLived) Context() context.Context { return l.owner.Context() }

// store opens and migrates the benchmark's database on first use.
func (f *benchFixture) store(b *testing.B) store.Backend {
	b.Helper()
	if f.s == nil {
		tb := longLived{TB: b, owner: f.owner}
		s := f.h.Open(tb, f.h.NewDB(tb), nil)
		if _, err := s.Migrate(tb.Context()); err != nil {
			b.Fatalf("Migrate: %v", err)
		}
		f.s = s
	}
	return f.s
}

// createMany creates n instances from p, in parallel transactions where the
// backend has concurrent writers, and returns their ids.
func createMany(b *testing.B, s store.Backend, n int, p func(i int) store.CreateParams) []string {
	b.Helper()
	ctx := b.Context()
	ids := make([]string, n)
	workers := 1
	if s.Capabilities().ConcurrentWriters {
		workers = 8
	}
	const perTx = 500
	var (
		next  atomic.Int64
		mu    sync.Mutex
		first error
	)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				lo := int(next.Add(perTx)) - perTx
				if lo >= n {
					return
				}
				hi := min(lo+perTx, n)
				ps := make([]store.CreateParams, 0, hi-lo)
				for i := lo; i < hi; i++ {
					ps = append(ps, p(i))
				}
				created, _, err := s.ApplyGroup(ctx, ps, nil, nil)
				for i, inst := range created {
					ids[lo+i] = inst.ID
				}
				if err != nil {
					mu.Lock()
					first = err
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		b.Fatalf("creating %d instances: %v", n, first)
	}
	return ids
}

// owned is an instance owned by one goroutine, with the version it is at.
type owned struct {
	id      string
	version int64
}

func benchUpdateStateUncontended(b *testing.B, f *benchFixture) {
	s := f.store(b)
	ctx := b.Context()
	// One instance per goroutine of RunParallel, kept across rounds with the
	// version each is at.
	pool, _ := f.data.([]*owned)
	if need := runtime.GOMAXPROCS(0); len(pool) < need {
		for _, id := range createMany(b, s, need-len(pool), func(int) store.CreateParams {
			return store.CreateParams{Status: workflow.StatusRunning, State: counterState(0)}
		}) {
			pool = append(pool, &owned{id: id})
		}
		f.data = pool
	}
	var next atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		o := pool[int(next.Add(1)-1)%len(pool)]
		for pb.Next() {
			inst, err := store.UpdateState(ctx, s, o.id, o.version, increment, "bench")
			if err != nil {
				b.Errorf("UpdateState: %v", err)
				return
			}
			o.version = inst.Version
		}
	})
}

// contenders is the RunParallel parallelism of the contended benchmarks:
// 8·GOMAXPROCS writers on one instance, so that they really contend even on a
// small machine.
const contenders = 8

func benchUpdateStateContended(b *testing.B, f *benchFixture) {
	s := f.store(b)
	ctx := b.Context()
	if f.data == nil {
		f.data = createMany(b, s, 1, func(int) store.CreateParams {
			return store.CreateParams{Status: workflow.StatusRunning, State: counterState(0)}
		})[0]
	}
	id := f.data.(string)
	before, err := s.Get(ctx, id)
	if err != nil {
		b.Fatal(err)
	}
	var ops atomic.Int64
	b.SetParallelism(contenders)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := Modify(ctx, s, id, func(cur *workflow.Instance) error { return increment(&cur.State) }, "bench"); err != nil {
				b.Errorf("ModifyState: %v", err)
				return
			}
			ops.Add(1)
		}
	})
	b.StopTimer()
	checkNoLostUpdates(b, s, id, before, ops.Load())
}

func benchUpdateStateContendedRetry(b *testing.B, f *benchFixture) {
	s := f.store(b)
	ctx := b.Context()
	if f.data == nil {
		f.data = createMany(b, s, 1, func(int) store.CreateParams {
			return store.CreateParams{Status: workflow.StatusRunning, State: counterState(0)}
		})[0]
	}
	id := f.data.(string)
	before, err := s.Get(ctx, id)
	if err != nil {
		b.Fatal(err)
	}
	var ops, retries atomic.Int64
	policy := store.RetryPolicy{
		Base: time.Millisecond, Factor: 2, Cap: 50 * time.Millisecond, MaxAttempts: 1000,
		OnRetry: func(int, error) { retries.Add(1) },
	}
	b.SetParallelism(contenders)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := store.UpdateWithRetry(ctx, s, id, policy, increment, "bench"); err != nil {
				b.Errorf("UpdateWithRetry: %v", err)
				return
			}
			ops.Add(1)
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(retries.Load())/float64(b.N), "retries/op")
	checkNoLostUpdates(b, s, id, before, ops.Load())
}

// checkNoLostUpdates fails b unless counter and version both grew by ops.
func checkNoLostUpdates(b *testing.B, s store.Backend, id string, before *workflow.Instance, ops int64) {
	b.Helper()
	after, err := s.Get(b.Context(), id)
	if err != nil {
		b.Fatal(err)
	}
	if dv, dc := after.Version-before.Version, int64(counter(after.State)-counter(before.State)); dv != ops || dc != ops {
		b.Errorf("lost updates: %d increments moved the version by %d and the counter by %d", ops, dv, dc)
	}
}

const stepsPerInstance = 20

func benchCompleteStep(b *testing.B, f *benchFixture) {
	s := f.store(b)
	ctx := b.Context()
	state := workflow.State{Steps: map[string]*workflow.StepState{}}
	for i := range stepsPerInstance {
		state.Steps[fmt.Sprintf("step-%02d", i)] = &workflow.StepState{Status: workflow.StepRunning, Attempts: 1}
	}
	// Enough fresh instances for b.N completions, made outside the timer.
	n := (b.N + stepsPerInstance - 1) / stepsPerInstance
	ids := createMany(b, s, n, func(int) store.CreateParams {
		return store.CreateParams{Status: workflow.StatusRunning, State: state}
	})
	output := json.RawMessage(`{"ok":true,"items":[1,2,3]}`)
	b.ResetTimer()
	for i := range b.N {
		_, err := CompleteStep(ctx, s, StepParams{
			ID: ids[i/stepsPerInstance], StepID: fmt.Sprintf("step-%02d", i%stepsPerInstance),
			Output: output, ExpectedVersion: int64(i % stepsPerInstance),
		})
		if err != nil {
			b.Fatalf("CompleteStep: %v", err)
		}
	}
}

const (
	batchRows = 10000
	batchSize = 100
)

// batchState tracks how many rows of the batch table are RUNNING across rounds.
type batchState struct {
	running int
	back    bool // moving PAUSED → RUNNING
}

func benchBatchUpdateStatus(b *testing.B, f *benchFixture) {
	s := f.store(b)
	ctx := b.Context()
	st, _ := f.data.(*batchState)
	if st == nil {
		createMany(b, s, batchRows, func(int) store.CreateParams {
			return store.CreateParams{Status: workflow.StatusRunning, State: counterState(0)}
		})
		st = &batchState{running: batchRows}
		f.data = st
	}
	// Each op moves 100 rows RUNNING → PAUSED until too few are left, then
	// back, and so on.
	cutoff := time.Now().Add(24 * time.Hour)
	moved := 0
	b.ResetTimer()
	for range b.N {
		p := store.BatchStatusParams{Status: workflow.StatusRunning, NewStatus: workflow.StatusPaused, UpdatedBefore: cutoff, Limit: batchSize}
		if !st.back && st.running < batchSize || st.back && batchRows-st.running < batchSize {
			st.back = !st.back
		}
		if st.back {
			p.Status, p.NewStatus = workflow.StatusPaused, workflow.StatusRunning
		}
		ids, err := Batch(ctx, s, p)
		if err != nil {
			b.Fatalf("BatchUpdateStatus: %v", err)
		}
		if len(ids) != batchSize {
			b.Fatalf("BatchUpdateStatus moved %d rows, want %d", len(ids), batchSize)
		}
		if p.NewStatus == workflow.StatusPaused {
			st.running -= len(ids)
		} else {
			st.running += len(ids)
		}
		moved += len(ids)
	}
	b.StopTimer()
	b.ReportMetric(float64(moved)/b.Elapsed().Seconds(), "rows/s")
}
