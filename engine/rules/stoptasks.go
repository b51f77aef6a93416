package rules

import (
	"github.com/flowd/flowd/workflow"

	"github.com/flowd/flowd/store"
)

// StopsTasks reports whether ch, decided on an instance in status from,
// stops that instance: it leaves it in a status that stops steps
// (workflow.Status.StopsSteps) from one that did not. Nothing runs for a
// stopped instance any more, so the write that stops it cancels its
// active tasks too (StopTasks).
func (ch *Change) StopsTasks(from workflow.Status) bool {
	if ch.LeasesOnly || from.StopsSteps() {
		return false
	}
	return ch.FinalStatus().StopsSteps()
}

// StopTasks cancels, in ch, the active tasks among tasks (the instance's
// rows as read) when ch stops its instance (StopsTasks): a stopped
// instance keeps no task QUEUED or LEASED, in the same write that stops
// it. A task ch already writes keeps ch's write.
func (ch *Change) StopTasks(from workflow.Status, tasks []store.Task) {
	if !ch.StopsTasks(from) {
		return
	}
	written := make(map[string]bool, len(ch.Update))
	for i := range ch.Update {
		written[ch.Update[i].Task.ID] = true
	}
	for i := range ch.Insert {
		written[ch.Insert[i].ID] = true
	}
	var rest []store.Task
	for _, t := range tasks {
		if !written[t.ID] {
			rest = append(rest, t)
		}
	}
	ch.Update = append(ch.Update, CancelTasks(rest)...)
}

// SetStatus decides a change of inst's status alone, to to (a transition
// of the API that is no action, a batch): the state and deadline stay as
// they are, a status that stops the instance cancels its active tasks and
// one that holds or releases them writes their held flag (tasks: every
// row of inst). The caller checks the transition; the store's write makes
// the state's active steps CANCELLED with it.
func SetStatus(inst *workflow.Instance, to workflow.Status, tasks []store.Task) Change {
	ch := Change{Status: to, State: inst.State, Deadline: inst.Deadline}
	ch.StopTasks(inst.Status, tasks)
	ch.Hold(inst.Status, tasks)
	return ch
}
