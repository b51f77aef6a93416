package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// Apply writes w in one write transaction: the
// version check, each guarded task update, the instance's new version (and
// the settled one) with their history rows, the new tasks. A miss returns
// its conflict from inside the transaction, which rolls everything back.
// See store.Applier.
func (q *querier) Apply(ctx context.Context, w *store.Write) (*workflow.Instance, error) {
	if w.TasksOnly {
		return nil, q.applyTasks(ctx, w)
	}
	pa, err := q.prepareApply(w)
	if err != nil {
		return nil, err
	}
	var out *workflow.Instance
	err = q.write(ctx, func(c dbtx) error {
		if out, err = pa.write(ctx, c); err != nil {
			return err
		}
		return putSearch(ctx, c, w.ID, store.SearchRows(w.Search))
	})
	if err != nil {
		return nil, err
	}
	pa.fill()
	return out, nil
}

// preparedApply is a checked Write with its rows as they will be stored.
type preparedApply struct {
	w                   *store.Write
	state, settledState *store.StoredState // the versions' states (settledState: the last one's)
	final               workflow.State     // the last version's state
	inserts, updates    []store.Task
	now                 time.Time
}

func (q *querier) prepareApply(w *store.Write) (*preparedApply, error) {
	if err := w.Prepare(); err != nil {
		return nil, err
	}
	state, err := store.PrepareState(w)
	if err != nil {
		return nil, err
	}
	final := state.State
	settledState := state
	if w.Settled != "" && store.StopSteps(w.Status, w.Settled, &final) {
		if settledState, err = store.EncodeState(final); err != nil {
			return nil, err
		}
	}
	now := q.now()
	inserts, err := prepareTasks(w.Insert, now)
	if err != nil {
		return nil, err
	}
	updates, err := prepareTaskWrites(w.Update, now)
	if err != nil {
		return nil, err
	}
	return &preparedApply{w: w, state: state, settledState: settledState, final: final, inserts: inserts, updates: updates, now: now}, nil
}

// prepareTaskWrites returns the rows of task writes as they will be stored
// at now.
func prepareTaskWrites(ws []store.TaskWrite, now time.Time) ([]store.Task, error) {
	updates := make([]store.Task, len(ws))
	for i, u := range ws {
		r := *u.Task
		var err error
		if r.Input, err = taskInput(r.Input); err != nil {
			return nil, fmt.Errorf("task %q: %w", r.ID, err)
		}
		normaliseTaskTimes(&r)
		r.UpdatedAt = store.Timestamp(now)
		updates[i] = r
	}
	return updates, nil
}

// write makes the write on c, inside the write transaction the caller
// holds, and returns the instance as written.
func (pa *preparedApply) write(ctx context.Context, c dbtx) (*workflow.Instance, error) {
	w := pa.w
	status, version, ks, err := currentSlot(ctx, c, w.ID)
	if err != nil {
		return nil, err
	}
	if version != w.ExpectedVersion {
		return nil, w.VersionConflict(version)
	}
	slot := w.SlotChange()
	if !slot.None() && status != w.From {
		// The change was decided on From: a write whose From is not the
		// stored status would miscount the key's slots.
		return nil, &store.ConflictError{ID: w.ID, Expected: w.ExpectedVersion, Actual: version,
			Reason: fmt.Sprintf("the workflow is %s, not %s", status, w.From)}
	}
	if err := applySlot(ctx, c, w.ID, ks, slot, false); err != nil {
		return nil, err
	}
	for i, u := range w.Update {
		write := applyTaskWrite
		if u.GuardOnly {
			write = checkTaskGuard
		}
		if err := write(ctx, c, &pa.updates[i], u.Guard, w); err != nil {
			return nil, err
		}
	}
	if err := applyLeased(ctx, c, store.LeasedChanges(w.Update, nil)); err != nil {
		return nil, err
	}
	prior, err := pa.prior(ctx, c)
	if err != nil {
		return nil, err
	}
	// The instance's row and its steps' records store the last version's
	// state, over the one the write moves from.
	changed := w.Changed
	if w.Settled != "" {
		// The settled version changes records of its own.
		changed = nil
	}
	records, err := store.SplitState(prior, pa.final, changed)
	if err != nil {
		return nil, err
	}
	actor := store.WriteActor(ctx, w.Actor)
	out, err := writeVersion(ctx, c, w.ID, w.Status, records.Header, nullMicros(w.Deadline), micros(pa.now))
	if err != nil {
		return nil, err
	}
	if err := appendHistory(ctx, c, w.ID, out.Version, w.Status, pa.state.Len(), pa.state.JSON, micros(pa.now), w.Cause, actor, store.HistoryPatchOf(prior, &w.State, w.Changed)); err != nil {
		return nil, err
	}
	if w.Settled != "" {
		if out, err = writeVersion(ctx, c, w.ID, w.Settled, records.Header, nullMicros(w.Deadline), micros(pa.now)); err != nil {
			return nil, err
		}
		if err := appendHistory(ctx, c, w.ID, out.Version, w.Settled, pa.settledState.Len(), pa.settledState.JSON, micros(pa.now), w.SettledCause, actor, store.HistoryPatchOf(&w.State, &pa.final, nil)); err != nil {
			return nil, err
		}
	}
	if err := putStepRecords(ctx, c, w.ID, records); err != nil {
		return nil, err
	}
	out.State = pa.final
	if w.Output != nil {
		// The output of the instance this write completes.
		if _, err := c.ExecContext(ctx, `UPDATE workflow_instances SET output = ?2 WHERE id = ?1`, w.ID, string(w.Output)); err != nil {
			return nil, interpretError(ctx, err)
		}
		out.Output = w.Output
	}
	return out, insertTasks(ctx, c, pa.inserts)
}

// fill gives the caller's tasks what was stored, once it is committed.
func (pa *preparedApply) fill() {
	pa.w.StateLen = pa.settledState.Len()
	for i, t := range pa.w.Insert {
		*t = pa.inserts[i]
	}
	for i, u := range pa.w.Update {
		if !u.GuardOnly {
			*u.Task = pa.updates[i]
		}
	}
}

// applyTaskWrite writes one updated task while its guard holds: the
// stored row is still the row as read (status, attempt, lease and its end;
// IS compares NULL-safely, as a row without a lease has no end). A miss is
// a *store.TaskConflictError.
func applyTaskWrite(ctx context.Context, c dbtx, r *store.Task, g store.TaskGuard, w *store.Write) error {
	res, err := c.ExecContext(ctx,
		`UPDATE workflow_tasks SET status = ?2, attempt = ?3, max_attempts = ?4, run_at = ?5,
		lease = ?6, lease_owner = ?7, lease_until = ?8, attempt_deadline = ?9,
		input = ?10, last_error = ?11, updated_at = ?12, held = coalesce(?18, held), output = coalesce(?19, output)
		WHERE id = ?1 AND instance_id = ?13
			AND status = ?14 AND attempt = ?15 AND lease = ?16 AND lease_until IS ?17`,
		r.ID, string(r.Status), r.Attempt, r.MaxAttempts, micros(r.RunAt),
		r.Lease, r.LeaseOwner, zeroNullMicros(r.LeaseUntil), zeroNullMicros(r.AttemptDeadline),
		string(r.Input), r.LastError, micros(r.UpdatedAt), w.ID,
		string(g.Status), g.Attempt, g.Lease, zeroNullMicros(g.LeaseUntil), heldArg(r, w), outputArg(r.Output))
	if err != nil {
		return fmt.Errorf("task %q: %w", r.ID, interpretError(ctx, err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return interpretError(ctx, err)
	}
	if n == 0 {
		return &store.TaskConflictError{InstanceID: w.ID, TaskID: r.ID}
	}
	return nil
}

// checkTaskGuard is applyTaskWrite of a guard-only write: the stored row
// must still be as its guard says, and it is not rewritten. The write
// transaction holds SQLite's only write lock, so no other writer can move
// the row before the commit.
func checkTaskGuard(ctx context.Context, c dbtx, r *store.Task, g store.TaskGuard, w *store.Write) error {
	var n int
	err := c.QueryRowContext(ctx,
		`SELECT count(*) FROM workflow_tasks WHERE id = ?1 AND instance_id = ?2
			AND status = ?3 AND attempt = ?4 AND lease = ?5 AND lease_until IS ?6`,
		r.ID, w.ID, string(g.Status), g.Attempt, g.Lease, zeroNullMicros(g.LeaseUntil)).Scan(&n)
	if err != nil {
		return fmt.Errorf("task %q: %w", r.ID, interpretError(ctx, err))
	}
	if n == 0 {
		return &store.TaskConflictError{InstanceID: w.ID, TaskID: r.ID}
	}
	return nil
}

// outputArg is the output a task write stores: NULL, keeping the stored
// one, when it has none (store.Task.Output).
func outputArg(out json.RawMessage) any {
	if out == nil {
		return nil
	}
	return string(out)
}

// heldArg is the held flag a task write sets: r's in a versioned write;
// NULL, keeping the stored one, in a TasksOnly write (see store.Task.Held).
func heldArg(r *store.Task, w *store.Write) any {
	if w.TasksOnly {
		return nil
	}
	return r.Held
}

// writeVersion writes one new version of id (the caller checked the
// version it moves from) with the state's header; the instance it returns
// has that header as its state.
func writeVersion(ctx context.Context, c dbtx, id string, status workflow.Status, header []byte, deadline any, now int64) (*workflow.Instance, error) {
	inst, err := scanInstance(c.QueryRowContext(ctx,
		`UPDATE workflow_instances SET state = ?1, status = ?2, deadline = ?5, version = version + 1, updated_at = ?3
		WHERE id = ?4
		RETURNING `+headerColumns,
		string(header), string(status), now, id, deadline))
	if err != nil {
		return nil, interpretError(ctx, err)
	}
	return inst, nil
}

// prior returns the state the write moves from, for its history and its
// steps' records: the caller's Prior, else the state as stored (the
// caller checked its version).
func (pa *preparedApply) prior(ctx context.Context, c dbtx) (*workflow.State, error) {
	if p := pa.w.Prior; p != nil {
		return p, nil
	}
	b, err := storedState(ctx, c, pa.w.ID)
	if err != nil || b == nil {
		return nil, err
	}
	s, err := decodeStored(pa.w.ID, string(b))
	if err != nil {
		return nil, err
	}
	return &s, nil
}
