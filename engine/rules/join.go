package rules

import (
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// joinVerdict is what a PENDING step's dependencies say of it.
type joinVerdict uint8

const (
	joinWaiting joinVerdict = iota // not decided yet
	joinReady                      // it runs (unless its `when` says no)
	joinSkipped                    // it can never run: SKIPPED
)

// joinOf decides a PENDING step by its join:
//   - all (the default): ready when every dependency is COMPLETED, SKIPPED
//     as soon as one is SKIPPED (skips propagate);
//   - any: decided when every dependency has finished (COMPLETED or
//     SKIPPED): ready if one at least COMPLETED, else SKIPPED;
//   - first: ready as soon as one dependency is COMPLETED, SKIPPED when all
//     are SKIPPED.
//
// A step without dependencies is ready. A dependency missing from steps has
// not finished.
func joinOf(s *workflow.Step, steps map[string]*workflow.StepState) joinVerdict {
	if len(s.DependsOn) == 0 {
		return joinReady
	}
	completed, skipped := 0, 0
	for _, dep := range s.DependsOn {
		st := steps[dep]
		switch {
		case st == nil:
		case st.Status == workflow.StepCompleted:
			completed++
		case st.Status == workflow.StepSkipped:
			skipped++
		}
	}
	n := len(s.DependsOn)
	switch s.Join {
	case workflow.JoinAny:
		switch {
		case completed+skipped < n:
			return joinWaiting
		case completed > 0:
			return joinReady
		}
		return joinSkipped
	case workflow.JoinFirst:
		switch {
		case completed > 0:
			return joinReady
		case skipped == n:
			return joinSkipped
		}
		return joinWaiting
	}
	switch {
	case skipped > 0:
		return joinSkipped
	case completed == n:
		return joinReady
	}
	return joinWaiting
}

// decidable reports whether some PENDING step of the instance is decided
// by its dependencies (ready or skipped): what advance would act on.
func (c *Definition) decidable(steps map[string]*workflow.StepState) bool {
	for i := range c.Def.Steps {
		s := &c.Def.Steps[i]
		if st := steps[s.ID]; st != nil && st.Status == workflow.StepPending && joinOf(s, steps) != joinWaiting {
			return true
		}
	}
	return false
}

// runDecided is the one place that moves PENDING steps on: each step its
// dependencies decided is skipped, or — a ready one — first withdraws the
// unfinished dependencies of a `join: first`, then evaluates its `when`
// and is scheduled or skipped. A skip can decide the steps after it, so it
// goes round until nothing moves. A `when` that fails to evaluate fails
// its step (no retry) with "when: <message>", and nothing more is decided:
// settle fails the instance. The expressions of the decision (each `when`,
// a foreach) read one document, decoded once within the node's gate
// (Env.Docs) and given back once every step has moved.
func (env Env) runDecided(c *Definition, inst *workflow.Instance, existing map[string]*store.Task, now time.Time, ch *Change) {
	doc := workflow.NewExprDoc(env.evalCtx(), env.Docs)
	defer doc.Close()
	steps := inst.State.Steps
	for moved := true; moved; {
		moved = false
		for i := range c.Def.Steps {
			s := &c.Def.Steps[i]
			st := steps[s.ID]
			if st == nil || st.Status != workflow.StepPending {
				continue
			}
			switch joinOf(s, steps) {
			case joinWaiting:
				continue
			case joinSkipped:
				skipStep(st)
			case joinReady:
				if s.Join == workflow.JoinFirst {
					withdraw(s, steps, existing, ch)
				}
				run, err := c.when(env.evalCtx(), env.exprBudget(), s.ID, inst, doc)
				switch {
				case err != nil:
					st.Status = workflow.StepFailed
					st.Error = "when: " + err.Error()
					return
				case !run:
					skipStep(st)
				default:
					env.schedule(c, inst, s.ID, existing, now, ch, doc)
				}
			}
			moved = true
		}
	}
}

// withdraw ends the race of a `join: first` step that became ready: its
// dependencies that have not finished become SKIPPED, and their tasks are
// cancelled, so a late completion, failure or heartbeat is refused and a
// withdrawn wait step takes no completion. Only the dependencies
// themselves are withdrawn, not what they wait for. A task the decision
// was given (existing) is cancelled here; otherwise its step is listed in
// Change.Withdrawn for the caller to cancel with CancelWithdrawn.
func withdraw(s *workflow.Step, steps map[string]*workflow.StepState, existing map[string]*store.Task, ch *Change) {
	for _, dep := range s.DependsOn {
		st := steps[dep]
		if st == nil || st.Status != workflow.StepPending && !st.Status.Active() {
			continue // finished, or FAILED: a failure is not withdrawn
		}
		hadTask := st.Status == workflow.StepRunning
		skipStep(st)
		switch t := existing[dep]; {
		case t != nil && t.Status.Active():
			u := *t
			CancelTask(&u)
			ch.Update = append(ch.Update, TaskUpdate{Task: u})
		case t == nil && hadTask:
			ch.Withdrawn = append(ch.Withdrawn, dep)
		}
	}
}

// CancelWithdrawn adds to ch the cancels of the active tasks of the steps
// ch withdrew (Change.Withdrawn), among tasks: the instance's task rows,
// read for the decision's write. It empties Change.Withdrawn: the cancels
// are added once.
func (ch *Change) CancelWithdrawn(tasks []store.Task) {
	defer func() { ch.Withdrawn = nil }()
	// A task ch already writes keeps ch's write: a task is written once.
	written := make(map[string]bool, len(ch.Update))
	for i := range ch.Update {
		written[ch.Update[i].Task.ID] = true
	}
	for _, t := range tasks {
		if written[t.ID] {
			continue
		}
		for _, id := range ch.Withdrawn {
			if t.StepID == id && t.Status.Active() {
				CancelTask(&t)
				ch.Update = append(ch.Update, TaskUpdate{Task: t})
			}
		}
	}
}
