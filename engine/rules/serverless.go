package rules

import (
	"encoding/json"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/sw"
	"github.com/flowd/flowd/workflow"
)

// serverless is the Language of Serverless Workflow documents: the
// interpreter's machine (w) runs the instance, its runtime kept in the
// state; state.steps mirrors its pending items, one task row each (sw.go).
// A version is a finished task: the machine decides each.
type serverless struct {
	c *Definition
	w *sw.Workflow
}

// CanRetry: a faulted machine cannot run again; the document's try/catch
// with retry retries its tasks.
func (serverless) CanRetry() bool { return false }

// ChildDefinition is the definition a pending `run: workflow` item names.
func (serverless) ChildDefinition(inst *workflow.Instance, step string) string {
	rt, err := SWRuntime(inst.State)
	if err != nil {
		return ""
	}
	it, ok := swPending(rt, step)
	if !ok || it.Kind != sw.ItemChild {
		return ""
	}
	return it.Definition
}

// completesStepsFromOutside: an item is finished by its worker, event or
// timer, which the machine then resumes with.
func (serverless) completesStepsFromOutside() bool { return false }

// start starts the machine; a document that waits for nothing settles in
// a second version.
func (l serverless) start(env Env, inst *workflow.Instance, now time.Time) (Change, error) {
	inst.Status = workflow.StatusRunning
	inst.Deadline = deadline(l.c, now)
	input := inst.Input
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	release, err := env.swDocuments(inst, nil)
	if err != nil {
		return Change{}, err
	}
	rt, step, err := l.w.Start(env.swEnv(inst, now), input)
	release()
	if err != nil {
		return Change{}, err
	}
	ch := Change{}
	if err := env.swApply(inst, rt, step, "", now, &ch); err != nil {
		return Change{}, err
	}
	switch inst.Status {
	case workflow.StatusCompleted, workflow.StatusFailed:
		// Nothing waited: created RUNNING, settled in a second version.
		ch.Cause = "workflow started"
		ch.Settled, ch.SettledCause = inst.Status, step.Cause
		inst.Status = workflow.StatusRunning
	}
	ch.setInstance(inst)
	ch.Notify = ch.claimable()
	return ch, nil
}

// taskCompleted resumes the machine with the item's outcome.
func (l serverless) taskCompleted(env Env, inst *workflow.Instance, t *store.Task, output json.RawMessage, now time.Time, ch *Change) error {
	// A tick's outcome is the machine's own evaluation: a state too
	// large to store cannot be made smaller by completing it again.
	resume := l.resume
	if t.Queue == store.QueueTick {
		resume = l.resumeBounded
	}
	return resume(env, inst, t, swResult(t, output), now, ch)
}

// eventTaken resumes the listen item with the event as a CloudEvent.
func (l serverless) eventTaken(env Env, inst *workflow.Instance, t *store.Task, ev Event, now time.Time, ch *Change) error {
	return l.resume(env, inst, t, sw.Result{Output: swEventOutput(ev)}, now, ch)
}

// eventUndelivered raises a runtime error at the listen item, for the
// document's try/catch to handle.
func (l serverless) eventUndelivered(env Env, inst *workflow.Instance, t *store.Task, reason string, now time.Time, ch *Change) error {
	return l.resumeBounded(env, inst, t, sw.Result{Error: swRuntimeError(reason)}, now, ch)
}

// reopen schedules nothing: the pending items wait in their rows, which a
// resume makes claimable again. Nothing is written beyond the status.
func (serverless) reopen(Env, *workflow.Instance, map[string]*store.Task, bool, time.Time, *Change) bool {
	return false
}

// abort ends the machine with a runtime error whose detail is msg
// (sw.Runtime.Abort); no item is pending any more, so state.steps, which
// mirrors them, is emptied.
func (serverless) abort(inst *workflow.Instance, msg string) error {
	rt, err := SWRuntime(inst.State)
	if err != nil {
		return err
	}
	rt.Abort(swRuntimeError(msg))
	raw, err := json.Marshal(rt)
	if err != nil {
		return err
	}
	inst.State.Extra[SWStateKey] = raw
	clear(inst.State.Steps)
	return nil
}
