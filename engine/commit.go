package engine

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/flowd/flowd/store"
)

// Group commit. The in-process workers' one-statement completions go through
// committers that write every completion waiting at that moment with one
// CommitSteps: one transaction, one WAL flush and, on PostgreSQL, one round
// trip for several workflows. On this
// project's benchmark machine the WAL flush, not the statements, was what a
// completion waited for most (synchronous_commit off: +40–50 % workflows/s;
// docs/BENCHMARKS.md). A lone completion is written on its own, as before,
// so nothing waits for company. Each completion stays one atomic, versioned
// CommitStep: when any of a batch fails (a conflict aborts a PostgreSQL
// transaction), the batch is rolled back and every completion in it is
// written on its own, so one conflict cannot fail the others. Several
// completions of one workflow are never in one batch.

// maxCommitBatch bounds the completions in one transaction.
const maxCommitBatch = 16

// committers is how many batches may be in flight at once: one keeps the
// batches large, two let the server work on one while the other commits.
const committers = 2

type commitReq struct {
	c    store.StepCommit
	done chan commitResult
}

type commitResult struct {
	version int64
	err     error
}

// runCommitters serves e.commits until stop is closed; the workers, the only
// senders, have ended by then.
func (e *Engine) runCommitters(stop <-chan struct{}) {
	var wg sync.WaitGroup
	for range committers {
		wg.Go(func() {
			for {
				var batch []*commitReq
				select {
				case r := <-e.commits:
					batch = append(batch, r)
				case <-stop:
					return
				}
			more:
				for len(batch) < maxCommitBatch {
					select {
					case r := <-e.commits:
						batch = append(batch, r)
					default:
						break more
					}
				}
				e.commitBatch(batch)
			}
		})
	}
	wg.Wait()
}

// commitStep writes c through the committers when the workers run, else
// directly.
func (e *Engine) commitStep(ctx context.Context, c store.StepCommit) (int64, error) {
	if e.commits == nil {
		return e.st.CommitStep(ctx, c)
	}
	req := &commitReq{c: c, done: make(chan commitResult, 1)}
	e.commits <- req
	r := <-req.done
	return r.version, r.err
}

// commitBatch writes the batch in one transaction, or each completion on its
// own when there is one or the transaction fails.
func (e *Engine) commitBatch(batch []*commitReq) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Two completions of one workflow computed from the same version cannot
	// both be written: the later ones conflict at once, without costing the
	// others their batch, and take the locking path.
	seen := make(map[string]bool, len(batch))
	kept := batch[:0]
	for _, r := range batch {
		id := r.c.Task.InstanceID
		if seen[id] {
			r.done <- commitResult{err: &store.ConflictError{ID: id, Actual: -1,
				Reason: "another completion of this workflow is in the same group commit"}}
			continue
		}
		seen[id] = true
		// The lease is checked at the time of writing, not of queueing.
		r.c.Now = e.clock()
		kept = append(kept, r)
	}
	batch = kept
	if len(batch) > 1 {
		// Instances in id order, here and on every node: two batches that
		// complete steps of the same instances lock them in the same order
		// and cannot deadlock.
		slices.SortStableFunc(batch, func(a, b *commitReq) int {
			return strings.Compare(a.c.Task.InstanceID, b.c.Task.InstanceID)
		})
		cs := make([]store.StepCommit, len(batch))
		for i, r := range batch {
			cs[i] = r.c
		}
		if versions, err := e.st.CommitSteps(ctx, cs); err == nil {
			for i, r := range batch {
				r.done <- commitResult{version: versions[i]}
			}
			return
		}
	}
	for _, r := range batch {
		v, err := e.st.CommitStep(ctx, r.c)
		r.done <- commitResult{version: v, err: err}
	}
}
