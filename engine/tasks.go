package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/flowd/flowd/engine/rules"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// claim leases up to limit claimable tasks of the given queues to owner
// (store.ClaimTasks: the task rows alone, no instance is written). A claim
// that a flow guard's miss left out (another claim took the key's slot or
// the bucket's token it counted on) tries again at once, on fresh reads.
func (e *Engine) claim(ctx context.Context, queues []string, limit int, owner string, lease time.Duration) ([]leased, error) {
	for range 3 {
		claimed, err := e.claimOnce(ctx, queues, limit, owner, lease)
		if errors.Is(err, store.ErrFlowMiss) {
			continue
		}
		if err != nil {
			return nil, err
		}
		e.countClaimed(len(claimed))
		return claimed, nil
	}
	return nil, nil
}

func (e *Engine) countClaimed(n int) {
	if e.m != nil && n > 0 {
		e.m.TasksClaimed.Add(float64(n))
	}
}

// claimOnce is one claim transaction.
func (e *Engine) claimOnce(ctx context.Context, queues []string, limit int, owner string, lease time.Duration) ([]leased, error) {
	claimed, held, err := e.st.ClaimTasks(ctx, store.ClaimParams{Queues: queues, Now: e.clock(), Limit: limit, Owner: owner, Lease: lease})
	if err != nil {
		// The leases may have committed and only the answer been lost: the
		// tasks stored under the leases given are this worker's to run;
		// left alone, they would wait for their leases to end and count an
		// attempt that never ran.
		got := e.storedUnderLeases(ctx, claimed)
		if len(got) == 0 {
			return nil, err
		}
		e.log.Warn("claim: the leases landed but the answer was lost", "error", err, "tasks", len(got))
		return got, nil
	}
	e.heldBack(held)
	return handlerTasks(claimed), nil
}

// handlerTasks are the handlers' views of claimed tasks, each with its
// instance as the claim read it: the base of its completion in one guarded
// write (commitCompletion).
func handlerTasks(claimed []store.Claimable) []leased {
	out := make([]leased, len(claimed))
	for i, c := range claimed {
		out[i] = handlerTask(c.Task, c.Instance)
		out[i].inst, out[i].TraceParent = c.Instance, c.Instance.TraceParent
	}
	return out
}

// storedUnderLeases returns, after a claim whose answer was lost, the
// tasks it meant to lease that are stored under the leases it gave them:
// a lease is a fresh token, so only that claim can have stored it. Their
// instances are not known as the claim left them: their completions read
// and decide again.
func (e *Engine) storedUnderLeases(ctx context.Context, meant []store.Claimable) []leased {
	var out []leased
	for _, c := range meant {
		if e.leasedAsGiven(ctx, c.Task.ID, c.Task.Lease) {
			out = append(out, handlerTask(c.Task, c.Instance))
			out[len(out)-1].TraceParent = c.Instance.TraceParent
		}
	}
	return out
}

// leasedAsGiven reports whether the task is stored leased under the lease
// this node gave it.
func (e *Engine) leasedAsGiven(ctx context.Context, taskID, lease string) bool {
	row, err := e.st.Task(ctx, taskID)
	return err == nil && row.Status == store.TaskLeased && row.Lease == lease
}

// leaseHolderOp runs decide for the holder of a task's lease: it reads the
// task and checks the lease (a stale lease reads nothing more), reads the
// instance, lets decide — one of the rules — decide on them, and writes the
// change with one guarded store.Apply (the task's update guarded by the
// lease, the instance by its version), deciding again on a fresh read when
// something moved. It returns the instance as written, the change and the
// rows it inserted; the change's StateLen is the length of the stored
// state as written.
//
// instanceID is the task's instance when the caller knows it ("" when
// not): on a store with one writer the decision is made in the instance's
// turn from the start (the task is read first to find it when it is not
// given), so that the lease holders of one instance's tasks — the
// iterations of a foreach step — take turns instead of racing.
func (e *Engine) leaseHolderOp(ctx context.Context, taskID, instanceID, lease string, cause func(t *store.Task) string, decide func(env rules.Env, c *compiled, inst *workflow.Instance, t *store.Task, now time.Time) (rules.Change, error)) (*workflow.Instance, *rules.Change, []*store.Task, error) {
	var ch *rules.Change
	var written *workflow.Instance
	var w *store.Write
	if instanceID == "" && !e.st.Capabilities().ConcurrentWriters {
		// Its errors are the decision's to report.
		if row, err := e.st.Task(ctx, taskID); err == nil {
			instanceID = row.InstanceID
		}
	}
	err := e.withDefs(ctx, func() error {
		var err error
		// No row locks: only the lease holder writes through here, and its
		// lease is the guard that matters.
		written, w, ch, err = e.readDecideApply(ctx, subject{id: instanceID}, func(q store.Querier, now time.Time) (*decided, error) {
			row, err := q.Task(ctx, taskID)
			if err != nil {
				return nil, err
			}
			t := *row
			if err := rules.CheckLease(&t, lease, now); err != nil {
				return nil, err
			}
			inst, err := q.Get(ctx, t.InstanceID)
			if err != nil {
				return nil, err
			}
			if inst.Status.Terminal() {
				return nil, fmt.Errorf("%w: %w", ErrNotRunning, terminal(inst))
			}
			c, err := e.cached(inst)
			if err != nil {
				return nil, err
			}
			// The rules change inst: the state as read is kept for the
			// history of the change.
			prior := inst.State.Clone()
			d := &decided{id: inst.ID, version: inst.Version, from: inst.Status, cause: cause(&t), read: byID(row), prior: &prior}
			env := e.rulesFor(ctx)
			d.ch, err = decide(env, c, inst, &t, now)
			if errors.Is(err, errNothingToWrite) {
				return nil, nil
			}
			if errors.Is(err, rules.ErrNeedTasks) {
				// A foreach step's decision that needs its other
				// iterations' rows: made again, on the state as read,
				// with every row of the instance.
				if env.Tasks, err = e.readRows(ctx, q, inst.ID, d); err != nil {
					return nil, err
				}
				inst.State, inst.Status = prior.Clone(), d.from
				d.ch, err = decide(env, c, inst, &t, now)
			}
			if err != nil {
				return nil, err
			}
			if d.ch.Cause != "" {
				// The decision names the version: a Serverless
				// Workflow's by the task that finished, not by the row
				// (a flowd step's cause is the row's).
				d.cause = d.ch.Cause
			}
			return d, cancelWithdrawn(ctx, q, d)
		})
		return err
	})
	if err != nil || ch == nil {
		return nil, nil, nil, err
	}
	if ch.Notify {
		e.wake()
	}
	// The length of the state as written, which the store measured.
	ch.StateLen = w.StateLen
	return written, ch, w.Insert, nil
}

// errNothingToWrite is a lease holder's decision that writes nothing
// (leaseHolderOp then returns nils).
var errNothingToWrite = errors.New("nothing to write")

// CompleteTask records the output of the attempt holding lease: step
// completed, task done, ready steps scheduled, instance settled — one
// transaction. A stale or expired lease, or an instance no longer running,
// changes nothing (ErrLeaseLost / ErrNotRunning); nor does an output that
// would make the state larger than Config.MaxStateBytes
// (workflow.ErrStateTooLarge): the lease stays valid, so the worker may
// complete the task with a smaller output or fail it.
//
// A remote worker's completion has no delivered state to write on and
// serves no queue of this node: it reads, decides and writes
// (leaseHolderOp), leasing the worker no next task.
func (e *Engine) CompleteTask(ctx context.Context, taskID, lease string, output json.RawMessage) error {
	out, err := completionOutput(output)
	if err != nil {
		return err
	}
	e.runs.drop(taskID)
	_, _, _, err = e.leaseHolderOp(ctx, taskID, "", lease, rules.CompletedCause, completeOnRead(lease, out, rules.NextLease{}))
	e.countCompleted(result(err, "completed"))
	return err
}

// completionOutput is a worker's output as a completion stores it: JSON,
// null when empty.
func completionOutput(output json.RawMessage) (json.RawMessage, error) {
	out := bytes.TrimSpace(output)
	if len(out) == 0 {
		out = []byte("null")
	}
	if !json.Valid(out) {
		return nil, fmt.Errorf("%w: output is not valid JSON", store.ErrInvalidArgument)
	}
	return out, nil
}

// completeOnRead is the decision of leaseHolderOp for the completion of
// the attempt holding lease with output out, leasing the worker the next
// task of next's queues that the completion schedules.
func completeOnRead(lease string, out json.RawMessage, next rules.NextLease) func(env rules.Env, c *compiled, inst *workflow.Instance, t *store.Task, now time.Time) (rules.Change, error) {
	return func(env rules.Env, c *compiled, inst *workflow.Instance, t *store.Task, now time.Time) (rules.Change, error) {
		return env.CompleteTask(c, inst, t, lease, out, next, now)
	}
}

// completeAndLeaseNext is CompleteTask for an in-process worker: when the completion
// schedules a step of one of the queues the worker serves, that task is leased
// to this node in the same transaction and returned, so the worker runs it
// next without a claim transaction of its own (one transaction per step
// instead of two on a chain). Its delivery is recorded exactly as a claim
// records it: attempt counted in the step's state, a fresh fencing lease.
//
// When the worker's claim (or the completion that leased it the task) left
// the instance's state with the task, the completion is first tried as one
// guarded write decided on that state, without reading anything. If
// anything moved on in between (another step of the instance completed, the
// instance was paused, the lease was lost), nothing was written, and the
// completion reads the task and the instance and decides again
// (leaseHolderOp), which also says why it fails if it does.
func (e *Engine) completeAndLeaseNext(ctx context.Context, task leased, output json.RawMessage, queues []string) (*leased, error) {
	out, err := completionOutput(output)
	if err != nil {
		return nil, err
	}
	if next, ok := e.commitCompletion(ctx, task, out, queues); ok {
		e.countCompleted("completed")
		return next, nil
	}
	next := rules.NextLease{Queues: queues, Owner: e.node, Lease: e.lease}
	written, ch, inserted, err := e.leaseHolderOp(ctx, task.ID, task.WorkflowID, task.Lease, rules.CompletedCause, completeOnRead(task.Lease, out, next))
	e.countCompleted(result(err, "completed"))
	if err != nil {
		return nil, err
	}
	leased := nextTask(ch, inserted, written)
	if leased != nil {
		leased.inst, leased.TraceParent = written, written.TraceParent
		if e.m != nil {
			e.m.TasksClaimed.Inc()
		}
	}
	return leased, nil
}

// commitCompletion completes t with one store.Write decided on t.inst, the
// instance as t's lease left it, and on t.row, the task as its delivery
// left it: the write is guarded by the instance's version and t's lease.
// ok is false when that is not possible — no such state, a plan that
// re-queues existing tasks, or anything that changed since (a conflict) —
// and then nothing was written.
func (e *Engine) commitCompletion(ctx context.Context, t leased, out json.RawMessage, queues []string) (next *leased, ok bool) {
	inst := t.inst
	if inst == nil || t.row == nil {
		return nil, false
	}
	c, err := e.cached(inst)
	if err != nil {
		return nil, false
	}
	// The state kept for the next step must not share the handler's buffer.
	out = bytes.Clone(out)
	decide := func(inst *workflow.Instance, now time.Time) *completion {
		return e.decideCompletion(ctx, c, t, out, queues, inst, now)
	}
	cp := decide(inst, e.clock())
	if cp == nil {
		return nil, false
	}
	res := e.applyCompletion(ctx, cp, decide)
	if res.redecided != nil {
		// The committers decided it again before writing it, on the
		// write of the instance before it (engine/commit.go).
		cp = res.redecided
	}
	next = cp.next
	written, claimed, err := res.inst, res.next, res.err
	if err != nil && (claimed != nil || next != nil && e.storedUnderLease(ctx, next)) {
		// The write landed although its answer was lost (a connection that
		// broke after the commit; a group commit whose COMMIT failed to
		// report and whose completions then conflicted with themselves):
		// the task this write leased, or its group's claim did, is stored
		// under the lease given. Going on with it is the only way it runs
		// before its lease ends, and with it, the attempt the lease counts.
		err = nil
		written = cp.after()
	}
	if next == nil {
		next = claimed
	}
	if err != nil {
		if !errors.Is(err, store.ErrConflict) {
			e.log.Debug("one-statement completion failed; reading and deciding again", "task", t.ID, "err", err)
		}
		return nil, false
	}
	if cp.ch.Notify {
		e.wake()
	}
	if next != nil && claimed == nil {
		next.inst, next.TraceParent = written, inst.TraceParent
		e.countClaimed(1)
	}
	return next, true
}

// completion is a worker's completion decided on an instance: the one
// write that stores it and the task it leases its worker next.
type completion struct {
	work  *workflow.Instance // the instance decided on, as the rules changed it
	ch    rules.Change
	w     *store.Write
	next  *leased  // the task the write leases the worker, if any
	claim []string // the queues to claim a task of with the write, when next is nil
}

// after is the instance as the completion's write leaves it: what a
// completion decided after it in the same batch is decided on, and what
// the worker goes on with when the write landed but its answer was lost.
func (cp *completion) after() *workflow.Instance {
	after := *cp.work
	after.Version, after.Status, after.State, after.Deadline = cp.w.NewVersion(), cp.w.FinalStatus(), cp.w.State, cp.w.Deadline
	return &after
}

// decideCompletion decides the completion of t with output out on inst;
// nil when one write without reading cannot store it: the rules refuse it
// (leaseHolderOp says why), or it has existing tasks to re-queue, cancel,
// hold or release, whose guards need rows this completion did not read,
// or it ends a child, whose final write carries its parent's outcome (the
// read-and-decide path writes both: applyWithParent).
func (e *Engine) decideCompletion(ctx context.Context, c *compiled, t leased, out json.RawMessage, queues []string, inst *workflow.Instance, now time.Time) *completion {
	work := *inst
	work.State = inst.State.Clone()
	row := *t.row
	// The lease is checked against the row as its delivery left it; the
	// write checks it again against the stored row.
	ch, err := e.rulesFor(ctx).CompleteTask(c, &work, &row, t.Lease, out, rules.NextLease{Queues: queues, Owner: e.node, Lease: e.lease}, now)
	if err != nil || len(ch.Update) > 1 || len(ch.Withdrawn) > 0 || stopsOtherTasks(&ch, inst.Status) || ch.HoldsChange(inst.Status) {
		return nil
	}
	d := &decided{id: inst.ID, version: inst.Version, from: inst.Status, ch: ch, prior: &inst.State}
	w := d.write(now)
	if inst.Parent != nil && reportsToParent(w.FinalStatus()) {
		return nil
	}
	cp := &completion{work: &work, ch: d.ch, w: w, next: nextTask(&d.ch, w.Insert, &work)}
	// A worker this completion leaves free asks for its next task with it.
	if cp.next == nil {
		cp.claim = queues
	}
	return cp
}

// storedUnderLease reports whether next, inserted by a completion whose
// result is not known, is stored under the lease that completion gave it:
// the lease is a fresh token, so only that write can have stored it.
func (e *Engine) storedUnderLease(ctx context.Context, next *leased) bool {
	return e.leasedAsGiven(ctx, next.ID, next.Lease)
}

// FailTask records a failed attempt: retried after the step's backoff while
// attempts are left and retryable is true, else the step fails and with it a
// RUNNING instance.
func (e *Engine) FailTask(ctx context.Context, taskID, lease, msg string, retryable bool) error {
	outcome := "failed"
	e.runs.drop(taskID)
	_, ch, _, err := e.leaseHolderOp(ctx, taskID, "", lease, rules.FailedCause, func(env rules.Env, c *compiled, inst *workflow.Instance, t *store.Task, now time.Time) (rules.Change, error) {
		return env.FailTask(c, inst, t, lease, msg, retryable, now)
	})
	if err == nil && ch.Update[0].Task.Status == store.TaskQueued {
		outcome = "retried"
	}
	e.countCompleted(result(err, outcome))
	return err
}

func result(err error, ok string) string {
	switch {
	case err == nil:
		return ok
	case errors.Is(err, ErrLeaseLost), errors.Is(err, ErrNotRunning):
		return "fenced"
	}
	return "error"
}

// Heartbeat extends the lease by d (the engine's lease when d <= 0), never
// past the attempt's deadline, and returns the new expiry. It writes the
// task row alone, guarded by the lease and by the instance's status as
// read (rules.ExtendLease decides on it).
func (e *Engine) Heartbeat(ctx context.Context, taskID, lease string, d time.Duration) (time.Time, error) {
	if d <= 0 {
		d = e.lease
	}
	var until time.Time
	_, _, _, err := e.readDecideApply(ctx, subject{}, func(q store.Querier, now time.Time) (*decided, error) {
		row, err := q.Task(ctx, taskID)
		if err != nil {
			return nil, err
		}
		t := *row
		if err := rules.CheckLease(&t, lease, now); err != nil {
			return nil, err
		}
		inst, err := q.Get(ctx, t.InstanceID)
		if err != nil {
			return nil, err
		}
		if until, err = rules.ExtendLease(&t, inst, now, d); err != nil {
			return nil, err
		}
		return tasksOnly(inst.ID, inst.Status, false, rules.TaskUpdate{Task: t, Guard: store.GuardOf(row)}), nil
	})
	if err == nil {
		// A run's next checkpoint is guarded by the row as extended.
		e.runs.extended(taskID, lease, until)
	}
	return until, err
}

// release gives a task back without using up its attempt (graceful
// shutdown; rules.GiveBack): the next claim delivers attempt+1. It writes
// the task row alone, guarded by the lease.
func (e *Engine) release(ctx context.Context, taskID, lease string) error {
	_, _, _, err := e.readDecideApply(ctx, subject{}, func(q store.Querier, now time.Time) (*decided, error) {
		row, err := q.Task(ctx, taskID)
		if err != nil {
			return nil, err
		}
		t := *row
		if err := rules.GiveBack(&t, lease, now); err != nil {
			return nil, err
		}
		return tasksOnly(t.InstanceID, "", true, rules.TaskUpdate{Task: t, Guard: store.GuardOf(row)}), nil
	})
	return err
}

// PollParams are a remote worker's long poll.
type PollParams struct {
	Worker   string
	Handlers []string
	Lease    time.Duration // 0: the engine's lease
	Wait     time.Duration // how long to wait for a task; 0: return at once
}

// Poll claims one task for a remote worker, waiting up to p.Wait for one to
// become available. It returns nil, nil when none did, and at once when the
// engine shuts down: a draining node hands out no more work.
func (e *Engine) Poll(ctx context.Context, p PollParams) (*Task, error) {
	if len(p.Handlers) == 0 {
		return nil, fmt.Errorf("%w: handlers must name at least one handler", store.ErrInvalidArgument)
	}
	for _, h := range p.Handlers {
		if h == "" || strings.HasPrefix(h, "flowd:") {
			return nil, fmt.Errorf("%w: %q is not a handler name a worker can serve", store.ErrInvalidArgument, h)
		}
	}
	lease := p.Lease
	if lease <= 0 {
		lease = e.lease
	}
	owner := p.Worker
	if owner == "" {
		owner = "remote"
	}
	seen, err := e.workerRecord(owner, p.Handlers)
	if err != nil {
		return nil, err
	}
	wake, release := e.waiter()
	defer release()
	deadline := time.NewTimer(p.Wait)
	defer deadline.Stop()
	tick := time.NewTicker(e.poll)
	defer tick.Stop()
	for {
		select {
		case <-e.draining:
			return nil, nil
		default:
		}
		// Noted on every round, so a worker inside a long poll stays listed.
		e.noteWorker(ctx, seen)
		tasks, err := e.claim(ctx, p.Handlers, 1, owner, lease)
		if err != nil {
			return nil, err
		}
		if len(tasks) > 0 {
			e.traceDelivery(ctx, &tasks[0].Task)
			if err := e.withJournal(ctx, &tasks[0]); err != nil {
				return nil, err
			}
			return &tasks[0].Task, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-deadline.C:
			return nil, nil
		case <-e.draining:
			return nil, nil
		case <-wake:
		case <-tick.C:
		}
	}
}
