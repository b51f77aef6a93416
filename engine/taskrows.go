package engine

import (
	"bytes"
	"strconv"

	"github.com/flowd/flowd/engine/rules"
	"github.com/flowd/flowd/store"
)

// The rules see a task row as a rules.Task; these convert between the
// store's rows and that view. A view is a plain value: converting costs a
// copy of the row's fields, no allocation.

// taskView is the rules' view of row.
func taskView(row *store.Task) rules.Task {
	return rules.Task{
		ID: row.ID, InstanceID: row.InstanceID, StepID: row.StepID, Iteration: row.Iteration, Queue: row.Queue,
		Status: rules.TaskStatus(row.Status), Attempt: row.Attempt, MaxAttempts: row.MaxAttempts,
		RunAt: row.RunAt, Lease: row.Lease, LeaseOwner: row.LeaseOwner, LeaseUntil: row.LeaseUntil,
		AttemptDeadline: row.AttemptDeadline, Input: row.Input, LastError: row.LastError, Flow: row.Flow,
	}
}

// setRow writes the view v into row: every field the rules may change.
func setRow(row *store.Task, v *rules.Task) {
	row.ID, row.InstanceID, row.StepID, row.Iteration, row.Queue = v.ID, v.InstanceID, v.StepID, v.Iteration, v.Queue
	row.Status, row.Attempt, row.MaxAttempts, row.RunAt = store.TaskStatus(v.Status), v.Attempt, v.MaxAttempts, v.RunAt
	row.Lease, row.LeaseOwner, row.LeaseUntil, row.AttemptDeadline = v.Lease, v.LeaseOwner, v.LeaseUntil, v.AttemptDeadline
	row.Input, row.LastError, row.Flow = v.Input, v.LastError, v.Flow
}

// newRow is a row to insert or write back from the view v.
func newRow(v *rules.Task) *store.Task {
	row := &store.Task{}
	setRow(row, v)
	return row
}

// newRows converts the tasks a change inserts.
func newRows(vs []rules.Task) []*store.Task {
	if len(vs) == 0 {
		return nil
	}
	rows := make([]*store.Task, len(vs))
	for i := range vs {
		rows[i] = newRow(&vs[i])
	}
	return rows
}

// views returns the rules' views of rows.
func views(rows []*store.Task) []rules.Task {
	vs := make([]rules.Task, len(rows))
	for i, row := range rows {
		vs[i] = taskView(row)
	}
	return vs
}

// byStep returns the views of rows by step (rules.TaskKey: by step and
// iteration for a foreach step's), for the rules that re-queue a step's
// existing row.
func byStep(rows []*store.Task) map[string]*rules.Task {
	m := make(map[string]*rules.Task, len(rows))
	for _, row := range rows {
		v := taskView(row)
		m[rules.TaskKey(row.StepID, row.Iteration)] = &v
	}
	return m
}

// handlerTask is the handler's view of a leased row.
func handlerTask(row *store.Task) Task {
	t := Task{
		ID: row.ID, WorkflowID: row.InstanceID, Step: row.StepID, Handler: row.Queue, Attempt: row.Attempt,
		// A copy: the handler may do what it likes with its input, and the
		// row is written back by the completion.
		Input: bytes.Clone(row.Input), IdempotencyKey: row.InstanceID + "/" + row.StepID, Lease: row.Lease, LeaseUntil: row.LeaseUntil,
		row: row,
	}
	if row.Iteration > 0 {
		index := row.Iteration - 1
		t.Index = &index
		t.IdempotencyKey += "/" + strconv.Itoa(index)
	}
	return t
}

// nextTask is the handler's view of the task ch leased in the same write
// (ch.Next), among the rows inserted for ch.Insert; nil without one.
func nextTask(ch *rules.Change, inserted []*store.Task) *Task {
	if ch.Next == nil {
		return nil
	}
	for _, row := range inserted {
		if row.ID == ch.Next.ID {
			t := handlerTask(row)
			return &t
		}
	}
	return nil
}
