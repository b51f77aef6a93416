package engine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// Group commit. The in-process workers' one-statement completions, and the
// starts made while the workers run, go through committers that write every
// completion and start waiting at that moment with one store ApplyGroup:
// one transaction, one WAL flush and, on PostgreSQL, one round trip for
// several workflows. On this project's benchmark machine the WAL flush, not
// the statements, was what a completion waited for most (synchronous_commit
// off: +40–50 % workflows/s; docs/BENCHMARKS.md). A lone completion is
// written on its own with Apply, so nothing waits for company. Each
// completion stays one guarded write: when any of a batch fails (a conflict
// aborts a PostgreSQL transaction), the batch is rolled back and every
// completion in it is written on its own, so one conflict cannot fail the
// others. Several completions of one workflow in one batch (the iterations
// of a foreach that the workers finish together) are written one after
// the other in its transaction: each after the first is decided again on
// the instance as the one before it leaves it (a foreach's iterations
// would otherwise conflict with each other, and all but one be read and
// decided again on their own).

// maxCommitBatch bounds the completions in one transaction. Draining a
// backlog of single-step workflows with 100 workers on PostgreSQL, 64 ran
// 4,006–4,218 steps/s against 16's 3,746–3,771, 128's 3,950–4,032 and
// 256's 3,827–3,877 (flowd bench --scenario queue --backlog 20000
// --workers 100); on SQLite 7,018–7,137 against 6,383–6,448. With 8
// workers the batches stay small and the workflow benchmark did not move.
const maxCommitBatch = 64

// committers is how many batches may be in flight at once: one keeps the
// batches large, two let the server work on one while the other commits.
const committers = 2

// commitReq is a completion or, when create is set, a start. A completion
// with claim set is a worker's whose completion leaves it free: the group
// also claims a task of those queues for it (store.GroupClaim), so that it
// gets its next task with its completion's commit instead of claiming in a
// transaction of its own.
type commitReq struct {
	w      *store.Write
	claim  []string
	create *store.CreateParams
	done   chan commitResult
	// cp is a worker's completion that w stores, and decide decides it
	// again on another instance (nil: it cannot be; see commitBatch).
	cp     *completion
	decide func(inst *workflow.Instance, now time.Time) *completion
	// redecided says cp was decided again in the batch. after is the
	// request it was decided after, when that one is in the same batch
	// and not written yet: this write may only follow that one's.
	redecided bool
	after     *commitReq
}

type commitResult struct {
	// inst is a start's instance, or a completion's instance as written.
	inst *workflow.Instance
	next *leased // a task claimed for the completion's worker
	err  error
	// redecided is the completion as the committers decided it again,
	// when they did.
	redecided *completion
}

// commitGroup is how starts reach the committers while they run: done is
// closed when they have stopped.
type commitGroup struct {
	reqs *commitQueues
	done <-chan struct{}
}

// commitQueues are the committers' requests: any committer takes from
// shared, the first free one writing the most that wait; committer i also
// takes from own[i] the completions handed to it because it is writing
// their instance (inFlight): the completions of one instance that several
// workers finish at once (a foreach's iterations) then meet in that
// committer's next batch and are written one after the other, each decided
// on the write before (commitBatch), instead of conflicting between two
// batches in flight at once.
type commitQueues struct {
	shared chan *commitReq
	own    []chan *commitReq

	mu       sync.Mutex
	inFlight map[string]int // instance → the committer writing it
}

func newCommitQueues(n int) *commitQueues {
	q := &commitQueues{shared: make(chan *commitReq), own: make([]chan *commitReq, n), inFlight: map[string]int{}}
	for i := range q.own {
		// Room for every worker's completion: a handing committer never
		// waits.
		q.own[i] = make(chan *commitReq, 256)
	}
	return q
}

// claim takes the instances of batch's completions for committer c: it
// returns the batch without those another committer is writing, which it
// hands to that one, and the instances it took.
func (q *commitQueues) claim(c int, batch []*commitReq) (kept []*commitReq, taken []string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, r := range batch {
		if r.w != nil {
			other, busy := q.inFlight[r.w.ID]
			switch {
			case busy && other != c:
				select {
				case q.own[other] <- r:
					continue
				default: // full: written here, at the risk of a conflict
				}
			case !busy:
				q.inFlight[r.w.ID] = c
				taken = append(taken, r.w.ID)
			}
		}
		kept = append(kept, r)
	}
	return kept, taken
}

// release ends committer c's claim on the instances it took.
func (q *commitQueues) release(c int, taken []string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, id := range taken {
		if q.inFlight[id] == c {
			delete(q.inFlight, id)
		}
	}
}

// create writes a new instance through the committers while they run, so
// that its commit is shared with the completions and starts waiting at that
// moment, else directly.
func (e *Engine) create(ctx context.Context, p store.CreateParams) (*workflow.Instance, error) {
	g := e.group.Load()
	if g == nil {
		return e.st.Create(ctx, p)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The committers write it under their own context: it carries its
	// actor with it.
	p.Actor = store.WriteActor(ctx, p.Actor)
	req := &commitReq{create: &p, done: make(chan commitResult, 1)}
	select {
	case g.reqs.shared <- req:
	case <-g.done:
		return e.st.Create(ctx, p)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case r := <-req.done:
		return r.inst, r.err
	case <-ctx.Done():
		// The start may still be written, as a direct Create cancelled in
		// flight may be: the caller learns that it does not know.
		return nil, ctx.Err()
	}
}

// startLanded reports whether p's first task is stored for p's instance:
// its id is new to this start, so the start's write landed.
func (e *Engine) startLanded(ctx context.Context, p *store.CreateParams) bool {
	if len(p.Tasks) == 0 || p.Tasks[0].ID == "" {
		return false
	}
	t, err := e.st.Task(ctx, p.Tasks[0].ID)
	return err == nil && t.InstanceID == p.ID
}

// runCommitters serves e.commits until stop is closed; the workers, the only
// senders, have ended by then. ctx carries the engine's run, without its
// cancellation: a batch taken is written even while the engine stops.
func (e *Engine) runCommitters(ctx context.Context, stop <-chan struct{}) {
	var wg sync.WaitGroup
	for c, own := range e.commits.own {
		wg.Go(func() {
			for {
				var batch []*commitReq
				select {
				case r := <-own:
					batch = append(batch, r)
				case r := <-e.commits.shared:
					batch = append(batch, r)
				case <-stop:
					return
				}
			more:
				for len(batch) < maxCommitBatch {
					select {
					case r := <-own:
						batch = append(batch, r)
					case r := <-e.commits.shared:
						batch = append(batch, r)
					default:
						break more
					}
				}
				batch, taken := e.commits.claim(c, batch)
				if len(batch) > 0 {
					e.commitBatch(ctx, batch)
				}
				e.commits.release(c, taken)
			}
		})
	}
	wg.Wait()
}

// applyCompletion writes cp, a worker's completion, through the committers
// when the workers run, else directly. With cp.claim (queues), the
// committers may also claim a task of those queues for the caller and
// return it as next. decide decides the completion again on another
// instance: the committers may, when another completion of the instance
// goes before it in their transaction, and then return that decision as
// redecided.
func (e *Engine) applyCompletion(ctx context.Context, cp *completion, decide func(*workflow.Instance, time.Time) *completion) commitResult {
	var res commitResult
	w := cp.w
	if e.commits == nil {
		res.inst, res.err = e.st.Apply(ctx, w)
	} else {
		// The committers write it under their own context: it carries its
		// actor with it.
		w.Actor = store.WriteActor(ctx, w.Actor)
		req := &commitReq{w: w, claim: cp.claim, cp: cp, decide: decide, done: make(chan commitResult, 1)}
		e.commits.shared <- req
		res = <-req.done
		if res.redecided != nil {
			w = res.redecided.w
		}
	}
	if res.err == nil {
		e.takeEvents(ctx, res.inst, w)
		e.afterWrite(ctx, res.inst, w)
	}
	return res
}

// commitBatch writes the batch in one transaction, or each start and
// completion on its own when there is one or the transaction fails. base is
// the committers' context: each attempt gets a bounded time of its own.
func (e *Engine) commitBatch(base context.Context, batch []*commitReq) {
	ctx, cancel := context.WithTimeout(base, 10*time.Second)
	defer cancel()
	var starts []*commitReq
	// Two completions of one workflow computed from the same version cannot
	// both be written as they are: a later one is decided again on the
	// instance as the one before it leaves it, and written after it; one
	// that cannot be conflicts at once, without costing the others their
	// batch, and is decided again from a fresh read (leaseHolderOp).
	last := make(map[string]*commitReq, len(batch))
	kept := batch[:0]
	for _, r := range batch {
		if r.create != nil {
			starts = append(starts, r)
			continue
		}
		id := r.w.ID
		if prev := last[id]; prev != nil {
			if !e.redecideAfter(r, prev) {
				r.done <- commitResult{err: &store.ConflictError{ID: id, Actual: -1,
					Reason: "another completion of this workflow is in the same group commit"}}
				continue
			}
		} else if lw := e.written.get(id); lw != nil && r.cp != nil && lw.CreatedAt.Equal(r.cp.work.CreatedAt) && lw.Version > r.w.ExpectedVersion {
			// Decided on a version this node has written over (of the same
			// instance, not of an earlier one of the same id): decided
			// again on what it wrote. Written as it is, it could only
			// conflict and fail its batch: one that cannot be decided
			// again is read and decided again on its own.
			if !e.redecide(r, lw) {
				r.done <- commitResult{err: &store.ConflictError{ID: id, Expected: r.w.ExpectedVersion, Actual: lw.Version,
					Reason: "decided on a version since written over"}}
				continue
			}
		}
		last[id] = r
		// The lease is checked at the time of writing, not of queueing.
		r.w.Now = e.clock()
		kept = append(kept, r)
	}
	batch = kept
	// The claimers of one claim serve the same queues (every worker loop
	// serves them all); another one gets no task from this group and
	// claims on its own.
	var claimers []*commitReq
	for _, r := range batch {
		if r.claim != nil && (len(claimers) == 0 || slices.Equal(r.claim, claimers[0].claim)) {
			claimers = append(claimers, r)
		} else {
			r.claim = nil
		}
	}
	var claim *store.GroupClaim
	if len(starts)+len(batch) > 1 || len(claimers) > 0 {
		// Instances in id order, here and on every node: two batches that
		// complete steps of the same instances lock them in the same order
		// and cannot deadlock. New instances lock nothing that exists.
		slices.SortStableFunc(batch, func(a, b *commitReq) int {
			return strings.Compare(a.w.ID, b.w.ID)
		})
		// New instances in id order too: two groups starting the same ids
		// (a client retrying) wait for each other's inserts in one order.
		slices.SortStableFunc(starts, func(a, b *commitReq) int { return strings.Compare(a.create.ID, b.create.ID) })
		ps := make([]store.CreateParams, len(starts))
		for i, r := range starts {
			ps[i] = *r.create
		}
		ws := make([]*store.Write, len(batch))
		for i, r := range batch {
			ws[i] = r.w
		}
		if len(claimers) > 0 {
			claim = &store.GroupClaim{Params: store.ClaimParams{Queues: claimers[0].claim, Now: e.clock(), Limit: len(claimers),
				Owner: e.node, Lease: e.lease}}
		}
		if insts, written, err := e.st.ApplyGroup(ctx, ps, ws, claim); err == nil {
			var next []leased
			if claim != nil {
				next = handlerTasks(claim.Claimed)
				e.countClaimed(len(next))
				e.heldBack(claim.HeldBack)
			}
			for i, r := range starts {
				r.done <- commitResult{inst: insts[i]}
			}
			for i, r := range batch {
				e.written.put(written[i])
				res := commitResult{inst: written[i], redecided: r.redecidedCompletion()}
				if r.claim != nil && len(next) > 0 {
					res.next, next = &next[0], next[1:]
				}
				r.done <- res
			}
			return
		}
	}
	// One by one, with time of their own: a group that timed out must not
	// leave them an expired context.
	ctx, cancel = context.WithTimeout(base, 10*time.Second)
	defer cancel()
	for _, r := range starts {
		inst, err := e.st.Create(ctx, *r.create)
		var keyErr *store.IdempotencyKeyError
		if errors.Is(err, store.ErrExists) && e.startLanded(ctx, r.create) ||
			errors.As(err, &keyErr) && keyErr.WorkflowID == r.create.ID && e.startLanded(ctx, r.create) {
			// The group was written and only its answer lost: this start's
			// own row (and key) is what exists.
			inst, err = e.st.Get(ctx, r.create.ID)
		}
		r.done <- commitResult{inst: inst, err: err}
	}
	results := make([]commitResult, len(batch))
	failed := make(map[*commitReq]bool)
	lost := false
	for i, r := range batch {
		if r.after != nil && failed[r.after] {
			// Decided on a version that was not written: the version
			// number may still be free, or taken by another write, whose
			// change this one would then undo. It is not written.
			failed[r] = true
			results[i] = commitResult{err: &store.ConflictError{ID: r.w.ID, Actual: -1,
				Reason: "decided on another completion of this workflow, which was not written"},
				redecided: r.redecidedCompletion()}
			// As the others, when the group was written but its answer lost.
			lost = lost || r.claim != nil
			continue
		}
		inst, err := e.st.Apply(ctx, r.w)
		failed[r] = err != nil
		if err == nil {
			e.written.put(inst)
		}
		results[i] = commitResult{inst: inst, err: err, redecided: r.redecidedCompletion()}
		lost = lost || r.claim != nil && errors.Is(err, store.ErrConflict)
	}
	// A group whose answer was lost may have been written: then its
	// claimers' completions conflict with themselves, and the tasks its
	// claim stored under the leases it gave are the claimers' to run. Asked
	// after the completions, which waited for the group's locks: a group
	// still committing when its answer was lost has committed by then.
	var next []leased
	if lost && claim != nil {
		next = e.storedUnderLeases(ctx, claim.Claimed)
		e.countClaimed(len(next))
	}
	for i, r := range batch {
		if r.claim != nil && len(next) > 0 {
			results[i].next, next = &next[0], next[1:]
		}
		r.done <- results[i]
	}
}

// redecideAfter decides r, a worker's completion of the instance prev
// completes before it in the same batch, again on the instance as prev's
// write leaves it, and reports whether it could: prev is a worker's
// completion that leaves the instance's status as it was and settles
// nothing (such as a foreach iteration's), and r decides again to one
// write (decideCompletion).
func (e *Engine) redecideAfter(r, prev *commitReq) bool {
	if prev.cp == nil || prev.w.Settled != "" || prev.w.Status != prev.w.From {
		return false
	}
	if !e.redecide(r, prev.cp.after()) {
		return false
	}
	r.after = prev
	return true
}

// redecide decides r, a worker's completion, again on inst and reports
// whether it could.
func (e *Engine) redecide(r *commitReq, inst *workflow.Instance) bool {
	if r.decide == nil {
		return false
	}
	cp := r.decide(inst, e.clock())
	if cp == nil {
		return false
	}
	cp.w.Actor = r.w.Actor
	r.cp, r.w, r.claim, r.redecided = cp, cp.w, cp.claim, true
	return true
}

// redecidedCompletion is r's completion when the batch decided it again.
func (r *commitReq) redecidedCompletion() *completion {
	if !r.redecided {
		return nil
	}
	return r.cp
}
