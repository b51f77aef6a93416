package rules

import (
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// Held reports whether a task of queue must wait, undelivered, because its
// instance is in status: only a RUNNING instance's tasks are delivered,
// and a PAUSED instance's sleep timers too (a sleep's timer keeps running
// while paused; what follows it waits). The claim takes only rows whose
// stored held flag (store.Task.Held) is false: this is where that flag is
// decided.
func Held(status workflow.Status, queue string) bool {
	if status == workflow.StatusRunning {
		return false
	}
	return status != workflow.StatusPaused || queue != store.QueueSleep
}

// HoldsChange reports whether ch, decided on an instance in status from,
// may change the held flag of the instance's rows it does not write
// itself: it leaves the instance in another status that does not stop it
// (a stop cancels the active rows: StopTasks). Only then does Hold need
// every row of the instance.
func (ch *Change) HoldsChange(from workflow.Status) bool {
	if ch.LeasesOnly {
		return false
	}
	final := ch.FinalStatus()
	return final != from && !final.StopsSteps()
}

// Hold sets the held flag (Held) of every task ch writes from the status
// it leaves the instance in, and, among tasks (the instance's rows as
// read, on an instance in status from), adds to ch the update of each
// active row ch does not write whose flag that status changes: a pause
// holds the queued and leased rows (a leased one may be queued again by a
// write of task rows alone, which keeps the flag), a resume or retry
// releases them, in the same write as the status. Calling it again on the
// same rows adds nothing. A change that writes no version (LeasesOnly)
// keeps the rows' flags.
func (ch *Change) Hold(from workflow.Status, tasks []store.Task) {
	if ch.LeasesOnly {
		return
	}
	final := ch.FinalStatus()
	written := make(map[string]bool, len(ch.Insert)+len(ch.Update))
	for i := range ch.Insert {
		t := &ch.Insert[i]
		t.Held = Held(final, t.Queue)
		written[t.ID] = true
	}
	for i := range ch.Update {
		u := &ch.Update[i]
		if held := Held(final, u.Task.Queue); u.Task.Held != held {
			// The row changes: it is written, not only guarded.
			u.Task.Held, u.GuardOnly = held, false
		}
		written[u.Task.ID] = true
	}
	if !ch.HoldsChange(from) {
		return
	}
	for _, t := range tasks {
		held := Held(final, t.Queue)
		if written[t.ID] || !t.Status.Active() || t.Held == held {
			continue
		}
		t.Held = held
		// A zero guard: the caller guards the update with the row it read.
		ch.Update = append(ch.Update, TaskUpdate{Task: t})
	}
}

// FinalStatus is the status ch leaves the instance in.
func (ch *Change) FinalStatus() workflow.Status {
	if ch.Settled != "" {
		return ch.Settled
	}
	return ch.Status
}
