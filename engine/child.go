package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flowd/flowd/engine/rules"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// Child workflows. A workflow step is RUNNING from the moment it is
// scheduled, with a task on the engine-served queue store.QueueChild;
// claiming that task starts the child (the latest revision of the step's
// definition) in one write with the parent's state naming it
// (startChild). The child's final write carries the parent step's outcome
// in the same transaction (applyWithParent, on every path that goes
// through readDecideApply); the children of a parent that no longer runs
// (cancelled, or stopped otherwise) are the sweepers' to cancel
// (cascade.go).

// maxChildStartAttempts bounds how often starting a child is decided again
// after its write conflicted with another writer of the parent.
const maxChildStartAttempts = 16

// startChild starts the child workflow of t, a claimed task of a workflow
// step. A definition that does not exist, or nesting deeper than
// rules.MaxChildDepth, fails the step for good (retrying would not change
// it).
func (e *Engine) startChild(ctx context.Context, t Task) {
	var err error
	for range maxChildStartAttempts {
		err = e.withDefs(ctx, func() error { return e.startChildOnce(ctx, t) })
		if !errors.Is(err, store.ErrConflict) {
			break
		}
	}
	if err != nil {
		level := e.log.Warn
		if errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrNotRunning) || errors.Is(err, errAbandoned) {
			level = e.log.Debug
		}
		level("starting a child workflow", "task", t.ID, "workflow", t.WorkflowID, "step", t.Step, "err", err)
	}
}

// startChildOnce reads the task and the parent, decides, and writes the
// child's creation and the parent's version with one store.ApplyGroup.
func (e *Engine) startChildOnce(ctx context.Context, t Task) error {
	row, err := e.st.Task(ctx, t.ID)
	if err != nil {
		return err
	}
	tv := *row
	now := e.clock()
	if err := rules.CheckLease(&tv, t.Lease, now); err != nil {
		return err
	}
	parent, err := e.st.Get(ctx, row.InstanceID)
	if err != nil {
		return err
	}
	pc, err := e.cached(parent)
	if err != nil {
		return err
	}
	name := pc.Language.ChildDefinition(parent, row.StepID)
	cc, err := e.compiled(ctx, name, 0)
	if errors.Is(err, store.ErrNotFound) {
		return e.FailTask(ctx, t.ID, t.Lease, rules.UnknownDefinitionError(name), false)
	}
	if err != nil {
		return err
	}
	depth, root, abandoned, err := e.lineage(ctx, parent)
	if err != nil {
		return err
	}
	if abandoned {
		// An ancestor stopped: the cancel cascade is on its way to this
		// workflow (and cancels this task with it). Starting a child now
		// would only give the cascade one more to catch.
		return errAbandoned
	}
	if depth >= rules.MaxChildDepth {
		return e.FailTask(ctx, t.ID, t.Lease, rules.DepthError(depth), false)
	}
	child := &workflow.Instance{ID: store.NewID(), State: cc.Def.InitialState(), Input: row.Input, Priority: cc.Def.PriorityOrDefault()}
	if string(child.Input) == "null" || len(child.Input) == 0 {
		child.Input = []byte("{}")
	}
	cch, err := e.rulesFor(ctx).Start(cc, child, now)
	if err != nil {
		return e.FailTask(ctx, t.ID, t.Lease, "child workflow: "+err.Error(), false)
	}
	slot, err := slotOf(cc, child.Input, e.maxState)
	if err != nil {
		return e.FailTask(ctx, t.ID, t.Lease, "child workflow: "+err.Error(), false)
	}
	search, err := searchOf(cc, child.Input, nil, e.maxState)
	if err != nil {
		return e.FailTask(ctx, t.ID, t.Lease, "child workflow: "+err.Error(), false)
	}
	cch.Hold(cch.Status, nil)
	prior := parent.State.Clone()
	d := &decided{id: parent.ID, version: parent.Version, from: parent.Status, prior: &prior}
	d.ch, err = e.decide.StartChild(parent, &tv, t.Lease, child.ID, now)
	if errors.Is(err, rules.ErrVersionLimit) {
		return e.FailTask(ctx, t.ID, t.Lease, rules.VersionLimitError(e.decide.MaxVersions), false)
	}
	if err != nil {
		return err
	}
	create := store.CreateParams{
		ID: child.ID, Definition: cc.Def.Name, DefinitionRevision: cc.Def.Revision, Status: cch.Status,
		Input: child.Input, State: cch.State, Deadline: cch.Deadline, Cause: cch.Cause,
		Tasks: insertRows(cch.Insert), Notify: cch.Notify, LatestRevision: true,
		Parent: parentRef(parent.ID, row), Concurrency: slot, Priority: child.Priority, Search: search,
		// The child's steps join the trace of the workflow that started it.
		TraceParent: parent.TraceParent,
		// One more descendant of the top-level workflow, counted in the
		// same transaction, exactly whatever the nodes starting children.
		Descendant: &store.DescendantCount{Root: root, Max: e.maxDescendants},
	}
	_, _, err = e.st.ApplyGroup(ctx, []store.CreateParams{create}, []*store.Write{d.write(now)}, nil)
	if slot != nil && errors.Is(err, store.ErrConcurrencyLimit) {
		return e.startChildOverLimit(ctx, t, cc, create, d, now)
	}
	if errors.Is(err, store.ErrDescendantLimit) {
		return e.failForLimit(ctx, t, rules.DescendantLimitError(root, e.maxDescendants))
	}
	if err != nil {
		return err
	}
	if cch.Notify {
		e.wake()
	}
	return nil
}

// startChildOverLimit starts a child workflow whose key had no free slot:
// under cancel_newest its parent's attempt fails (the step's retry policy
// starts another child after its backoff, as for a cancelled child); under
// queue and cancel_in_progress the child is created QUEUED (a start of the
// engine's own does not cancel another workflow to make room), with the
// parent's write that records it, and starts when a slot frees.
func (e *Engine) startChildOverLimit(ctx context.Context, t Task, cc *compiled, create store.CreateParams, d *decided, now time.Time) error {
	if cc.Def.Concurrency.StrategyOrDefault() == workflow.ConcurrencyCancelNewest {
		return e.FailTask(ctx, t.ID, t.Lease, fmt.Sprintf("child workflow: %s of definition %s", workflow.ConcurrencyLimitCause, cc.Def.Name), true)
	}
	_, _, err := e.st.ApplyGroup(ctx, []store.CreateParams{queuedParams(cc, create)}, []*store.Write{d.write(now)}, nil)
	if errors.Is(err, store.ErrDescendantLimit) {
		return e.failForLimit(ctx, t, rules.DescendantLimitError(create.Descendant.Root, create.Descendant.Max))
	}
	if err != nil {
		return err
	}
	// A slot freed meanwhile: its promotion may have run before this child
	// was stored.
	e.promote(ctx, cc.Def.Name, create.Concurrency.Key)
	return nil
}

// parentRef is the parent link of the child that row, a task of parent's
// workflow step, starts: with the item's index for an iteration of a
// foreach.
func parentRef(parent string, row *store.Task) *workflow.ParentRef {
	ref := &workflow.ParentRef{WorkflowID: parent, Step: row.StepID}
	if row.Iteration > 0 {
		i := row.Iteration - 1
		ref.Index = &i
	}
	return ref
}

// lineage is how many levels inst is below its top-level workflow (the
// number of its ancestors, counted up to rules.MaxChildDepth) and that
// workflow: its farthest stored ancestor, or inst itself; abandoned
// reports an ancestor read that no longer runs (its steps stopped).
func (e *Engine) lineage(ctx context.Context, inst *workflow.Instance) (depth int, root string, abandoned bool, err error) {
	for inst.Parent != nil && depth < rules.MaxChildDepth {
		p, err := e.st.Get(ctx, inst.Parent.WorkflowID)
		if errors.Is(err, store.ErrNotFound) {
			return depth + 1, inst.ID, abandoned, nil // a deleted ancestor still counts as one
		}
		if err != nil {
			return 0, "", false, err
		}
		abandoned = abandoned || p.Status.StopsSteps()
		inst, depth = p, depth+1
	}
	return depth, inst.ID, abandoned, nil
}

// errAbandoned: a workflow step's child is not started because an
// ancestor of its workflow has stopped.
var errAbandoned = errors.New("an ancestor of the workflow stopped: its cancel is on its way")

// failForLimit fails t, a claimed task of a workflow step that ran into a
// limit (msg names it), and its instance for good (rules.Env.FailForLimit).
func (e *Engine) failForLimit(ctx context.Context, t Task, msg string) error {
	_, _, _, err := e.leaseHolderOp(ctx, t.ID, t.WorkflowID, t.Lease, rules.FailedCause, func(env rules.Env, c *compiled, inst *workflow.Instance, rt *store.Task, now time.Time) (rules.Change, error) {
		return env.FailForLimit(c, inst, rt, t.Lease, msg, now)
	})
	return err
}

// reportsToParent reports whether a child's write to status is its
// outcome for the parent's step.
func reportsToParent(status workflow.Status) bool {
	switch status {
	case workflow.StatusCompleted, workflow.StatusFailed, workflow.StatusTimedOut, workflow.StatusCancelled:
		return true
	}
	return false
}

// applyWithParent writes w and, when w is the final write of a child
// workflow whose parent's step still waits for it, the parent's outcome in
// the same transaction (store.ApplyGroup) — and so on up: a parent that
// this ends reports to its own parent in that transaction too. Each
// parent's write is guarded by its task's lease and its version: a second
// delivery of an outcome (another node, a retried write) misses, and the
// decision made again on a fresh read finds that the step no longer waits.
// The parents' outcomes are decided on reads through q before anything is
// written (withParents).
//
// It returns the instance w wrote and the parents' writes it made. A
// write that ends no child, the common case, is one Apply.
func (e *Engine) applyWithParent(ctx context.Context, q store.Querier, w *store.Write) (*workflow.Instance, []*store.Write, error) {
	ws, err := e.withParents(ctx, q, w)
	if err != nil {
		return nil, nil, err
	}
	if len(ws) == 1 {
		out, err := q.Apply(ctx, w)
		if err != nil {
			return nil, nil, err
		}
		return out, nil, nil
	}
	_, written, err := q.ApplyGroup(ctx, nil, ws, nil)
	if err != nil {
		return nil, nil, err
	}
	e.wakeForParents(ws[1:])
	return written[0], ws[1:], nil
}

// withParents returns w followed by the writes of the parents that w, the
// final write of a child workflow, brings about (parentOutcome), up the
// chain of parents: decided on reads through q, written by none.
func (e *Engine) withParents(ctx context.Context, q store.Querier, w *store.Write) ([]*store.Write, error) {
	ws := []*store.Write{w}
	for cur := w; len(ws) <= rules.MaxChildDepth+1; {
		pw, err := e.parentOutcome(ctx, q, cur)
		if err != nil {
			return nil, err
		}
		if pw == nil {
			break
		}
		ws, cur = append(ws, pw), pw
	}
	return ws, nil
}

// wakeForParents wakes the workers when one of the parents' writes, made,
// queued work.
func (e *Engine) wakeForParents(parents []*store.Write) {
	for _, pw := range parents {
		if pw.Notify {
			e.wake()
			return
		}
	}
}

// parentOutcome is the parent's write that w, a write of a child workflow,
// brings about: nil when w does not end the child or nothing waits for it.
func (e *Engine) parentOutcome(ctx context.Context, q store.Querier, w *store.Write) (*store.Write, error) {
	if w.TasksOnly || !reportsToParent(w.FinalStatus()) {
		return nil, nil
	}
	child, err := q.Get(ctx, w.ID)
	if err != nil || child.Parent == nil {
		return nil, err
	}
	parent, err := q.Get(ctx, child.Parent.WorkflowID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil // deleted: nobody waits
	}
	if err != nil {
		return nil, err
	}
	tasks, err := q.TasksOfInstance(ctx, parent.ID)
	if err != nil {
		return nil, err
	}
	iteration := 0
	if child.Parent.Index != nil {
		iteration = *child.Parent.Index + 1
	}
	var row *store.Task
	for _, t := range tasks {
		if t.StepID == child.Parent.Step && t.Iteration == iteration {
			row = t
		}
	}
	if row == nil || parent.Definition == "" {
		return nil, nil
	}
	tv := *row
	if !rules.WaitsFor(parent, &tv, child.ID) {
		return nil, nil
	}
	pc, err := e.cached(parent)
	if err != nil {
		return nil, err
	}
	var output []byte
	if w.FinalStatus() == workflow.StatusCompleted {
		cc, err := e.cached(child)
		if err != nil {
			return nil, err
		}
		if output, err = rules.ChildOutput(cc, child.Input, w.State, w.Output, e.maxState); err != nil {
			return nil, err
		}
	}
	prior := parent.State.Clone()
	// Every row of the parent: a foreach iteration that fails for good
	// cancels the others (their guards are the rows as read).
	d := &decided{id: parent.ID, version: parent.Version, from: parent.Status, read: byID(tasks...), prior: &prior}
	env := e.rulesFor(ctx)
	env.Tasks = byStep(tasks)
	var ok bool
	if d.ch, ok, err = env.ChildFinished(pc, parent, &tv, child.ID, w.FinalStatus(), output, w.Now); err != nil || !ok {
		return nil, err
	}
	d.ch.StopTasks(d.from, copies(tasks)) // a parent the outcome stops
	return d.write(w.Now), nil
}

// cancelChild cancels child when it still runs.
func (e *Engine) cancelChild(ctx context.Context, child *workflow.Instance) {
	switch child.Status {
	case workflow.StatusPending, workflow.StatusQueued, workflow.StatusRunning, workflow.StatusPaused:
	default:
		return
	}
	_, err := e.act(ctx, child.ID, "cancel", fmt.Sprintf("parent workflow %s cancelled", child.Parent.WorkflowID), nil)
	var na *rules.NotAllowedError
	if err != nil && !errors.As(err, &na) && !errors.Is(err, workflow.ErrTerminal) && !errors.Is(err, store.ErrNotFound) {
		e.log.Warn("cancelling a child workflow", "workflow", child.ID, "err", err)
	}
}

// cancelAbandonedChild cancels the child of the parent's step whose
// attempt ended without it: the step timed out (its task's lease ended at
// the step timeout). A child whose parent stopped running is the cancel
// cascade's (cascade.go).
func (e *Engine) cancelAbandonedChild(ctx context.Context, parent *workflow.Instance, step string, iteration int) {
	id := parent.State.Steps[step].ChildOf(iteration)
	if id == "" {
		return
	}
	child, err := e.st.Get(ctx, id)
	if err != nil {
		return
	}
	e.cancelChild(ctx, child)
}

// cancelDroppedChildren cancels the children of the workflow-step tasks
// that w, written, cancelled: an iteration cancelled because another one
// of its foreach failed, a step withdrawn by a join: first. Nothing waits
// for their outcome any more, so they must not run on.
func (e *Engine) cancelDroppedChildren(ctx context.Context, w *store.Write) {
	for _, u := range w.Update {
		if u.Task.Queue != store.QueueChild || u.Task.Status != store.TaskCancelled {
			continue
		}
		id := w.State.Steps[u.Task.StepID].ChildOf(u.Task.Iteration)
		if id == "" {
			continue
		}
		if child, err := e.st.Get(ctx, id); err == nil {
			e.cancelChild(ctx, child)
		}
	}
}
