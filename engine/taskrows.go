package engine

import (
	"bytes"

	"github.com/flowd/flowd/engine/rules"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// The rules decide on copies of the rows read (store.Task values), so that
// the rows stay as read: the guards of the write are the rows as read.

// copies returns copies of rows, for the rules to decide on.
func copies(rows []*store.Task) []store.Task {
	vs := make([]store.Task, len(rows))
	for i, row := range rows {
		vs[i] = *row
	}
	return vs
}

// byStep returns copies of rows by step (rules.TaskKey: by step and
// iteration for a foreach step's), for the rules that re-queue a step's
// existing row.
func byStep(rows []*store.Task) map[string]*store.Task {
	m := make(map[string]*store.Task, len(rows))
	for _, row := range rows {
		v := *row
		m[rules.TaskKey(row.StepID, row.Iteration)] = &v
	}
	return m
}

// insertRows returns the rows a change inserts, as the store takes them: the
// change's own (the store fills them in as stored).
func insertRows(ts []store.Task) []*store.Task {
	if len(ts) == 0 {
		return nil
	}
	rows := make([]*store.Task, len(ts))
	for i := range ts {
		rows[i] = &ts[i]
	}
	return rows
}

// handlerTask is the handler's view of a leased row of instance inst (nil
// when not known), with the row.
func handlerTask(row *store.Task, inst *workflow.Instance) leased {
	t := leased{Task: Task{
		ID: row.ID, WorkflowID: row.InstanceID, Step: row.StepID, Handler: row.Queue, Attempt: row.Attempt,
		// A copy: the handler may do what it likes with its input, and the
		// row is written back by the completion.
		Input: bytes.Clone(row.Input), IdempotencyKey: rules.IdempotencyKey(row, inst), Lease: row.Lease, LeaseUntil: row.LeaseUntil,
	}, row: row}
	if row.Iteration > 0 {
		index := row.Iteration - 1
		t.Index = &index
	}
	return t
}

// nextTask is the handler's view of the task ch leased in the same write
// (ch.Next), among the rows inserted for ch.Insert; nil without one.
func nextTask(ch *rules.Change, inserted []*store.Task, inst *workflow.Instance) *leased {
	if ch.Next == nil {
		return nil
	}
	for _, row := range inserted {
		if row.ID == ch.Next.ID {
			t := handlerTask(row, inst)
			return &t
		}
	}
	return nil
}
