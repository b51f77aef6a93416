package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/flowd/flowd/engine/rules"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// maxApplyAttempts bounds how often a decision is made again after its
// write conflicted: enough for any real contention on one instance, and a
// bound should a guard keep missing.
const maxApplyAttempts = 256

// lockAfterConflicts is how many races a decision loses, on a store with
// concurrent writers, before it takes this node's turn for the instance
// (turns): a read-modify-write must end by waiting for its turn, never
// fail for contention alone.
const lockAfterConflicts = 8

// decided is one decision ready to be written: the instance as read (its
// version and status are the write's guard) and the change.
type decided struct {
	id      string
	version int64
	from    workflow.Status
	ch      rules.Change
	cause   string // the history cause; "" for the rules' own
	// read holds the task rows the decision was made on, by id: an update
	// the rules did not guard (a re-queue, a cancel) is written only while
	// its row is as read.
	read map[string]*store.Task
	// tasksOnly: the change writes task rows alone (store.Write.TasksOnly),
	// no version of the instance; from, when set, is then the status the
	// instance must still have.
	tasksOnly bool
	// prior, when the decision kept it, is the state as read (the rules
	// change the instance they are given): the store then writes the
	// history of the change from it (store.Write.Prior).
	prior *workflow.State
	// allRows: read holds every task row of the instance, and the
	// decision cancelled what its stop cancels (stopTasks reads nothing).
	allRows bool
}

// subject is the instance a decision is about, as far as its caller knows
// it before reading.
type subject struct {
	// id is the instance; "" when only the decision's read tells (on a
	// store with one writer, its turn is then taken from the first
	// conflict on).
	id string
}

// about is the subject of a decision about instance id.
func about(id string) subject { return subject{id: id} }

// readDecideApply is the engine's write: read and decide (the caller's
// decide, which reads without locks and calls the rules), then apply the
// change with one guarded store write (Apply, or ApplyGroup with the
// parents' writes a child's final write brings about, decided on reads of
// their own: applyWithParent). When another write moved the instance or
// one of its tasks in between, nothing was written: decide runs again on a
// fresh read, after a short backoff, until ctx ends (or maxApplyAttempts).
// Errors of decide are returned as they are, never retried; a decide that
// returns nil decided there is nothing to write (and readDecideApply
// returns nils). It returns the instance as written (nil for a tasks-only
// write) and the write (its inserted tasks as stored).
//
// Nothing is read or decided inside a transaction on a store whose writers
// are serialised (SQLite): a decision may evaluate programs for a second,
// and the single write lock held meanwhile would stall every other write.
// There the decision is made in this node's turn for the instance (turns):
// on.id's from the start, or, without one, the decided instance's from the
// first conflict on, so that the node's decisions and locked writes of the
// instance wait for each other instead of racing.
//
// On a store with concurrent writers (PostgreSQL) no decision holds a lock
// in the database: the writers of one instance race as equals, each loser
// deciding again after a random backoff that doubles (up to 50 ms), until
// one has lost lockAfterConflicts races: it then takes the node's turn for
// the instance, and the node's other writers of it queue behind it.
func (e *Engine) readDecideApply(ctx context.Context, on subject, decide func(q store.Querier, now time.Time) (*decided, error)) (*workflow.Instance, *store.Write, *rules.Change, error) {
	backoff := time.Millisecond
	serial := !e.st.Capabilities().ConcurrentWriters
	var turn func()
	defer func() {
		if turn != nil {
			turn()
		}
	}()
	for attempt := 1; ; attempt++ {
		if turn == nil && on.id != "" && (serial || attempt > lockAfterConflicts || e.turns.busy(on.id)) {
			var err error
			if turn, err = e.turns.take(ctx, on.id); err != nil {
				return nil, nil, nil, err
			}
		}
		var out *workflow.Instance
		var w *store.Write
		var parents []*store.Write
		var d *decided
		var decideErr error
		once := func(q store.Querier) error {
			now := e.clock()
			if d, decideErr = decide(q, now); decideErr != nil || d == nil {
				return decideErr
			}
			// A join: first the decision made withdrew steps whose task
			// rows it was not given: their cancels join the write.
			if decideErr = cancelWithdrawn(ctx, q, d); decideErr != nil {
				return decideErr
			}
			// A write that stops the instance cancels its tasks.
			if decideErr = stopTasks(ctx, q, d); decideErr != nil {
				return decideErr
			}
			// One that pauses or resumes it holds or releases them.
			if decideErr = holdTasks(ctx, q, d); decideErr != nil {
				return decideErr
			}
			w = d.write(now)
			var err error
			out, parents, err = e.applyWithParent(ctx, q, w)
			return err
		}
		err := once(e.st)
		if decideErr != nil {
			return nil, nil, nil, decideErr
		}
		if err == nil && d == nil {
			return nil, nil, nil, nil
		}
		if err == nil {
			// The turn ends with the write: what follows it (events,
			// promotions, the cancels of children) decides about other
			// instances, in turns of their own.
			if turn != nil {
				turn()
				turn = nil
			}
			e.takeEvents(ctx, out, w)
			e.afterWrite(ctx, out, w)
			for _, written := range append([]*store.Write{w}, parents...) {
				if !written.TasksOnly {
					e.cancelDroppedChildren(ctx, written)
				}
			}
			return out, w, &d.ch, nil
		}
		if !errors.Is(err, store.ErrConflict) || attempt == maxApplyAttempts {
			return nil, nil, nil, err
		}
		if on.id == "" && d != nil {
			on.id = d.id
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		select {
		case <-ctx.Done():
			return nil, nil, nil, fmt.Errorf("%w (while retrying: %w)", ctx.Err(), err)
		case <-time.After(wait):
		}
		backoff = min(2*backoff, 50*time.Millisecond)
	}
}

// write is the store's form of d, guarded by the version read and by each
// update's guard: the row the rules decided on, else the row read for them.
func (d *decided) write(now time.Time) *store.Write {
	ch := &d.ch
	w := &store.Write{ID: d.id, From: d.from, Now: now, Notify: ch.Notify, TasksOnly: d.tasksOnly}
	if !d.tasksOnly {
		// Every row the version writes is held as its status says.
		ch.Hold(d.from, nil)
		w.ExpectedVersion = d.version
		w.Status, w.State, w.Deadline, w.Cause = ch.Status, ch.State, ch.Deadline, d.cause
		w.Settled, w.SettledCause = ch.Settled, ch.SettledCause
		w.Insert = insertRows(ch.Insert)
		w.Prior = d.prior
		w.Changed, w.StateLen = ch.Edited, ch.StateLen
		if w.Cause == "" {
			w.Cause = ch.Cause
		}
		w.Output, w.Search = ch.Output, ch.Search
		if ch.Settled != "" {
			w.SettledCause += ch.Note
		} else {
			w.Cause += ch.Note
		}
	}
	for i := range ch.Update {
		u := &ch.Update[i]
		g := u.Guard
		if row := d.read[u.Task.ID]; g == (store.TaskGuard{}) && row != nil {
			g = store.GuardOf(row)
		}
		w.Update = append(w.Update, store.TaskWrite{Task: &u.Task, Guard: g, GuardOnly: u.GuardOnly})
	}
	return w
}

// stopTasks adds to d's write the cancel of the instance's active tasks
// when d stops the instance (rules.Change.StopTasks), reading its rows
// unless the decision had them all. A completion the rules decided reads
// nothing: the rules complete an instance only once every step has
// finished, so none of its tasks is active but the one the completion
// writes (a transition that forces COMPLETED reads its rows: allRows).
func stopTasks(ctx context.Context, q store.Querier, d *decided) error {
	if d.tasksOnly || d.allRows || !stopsOtherTasks(&d.ch, d.from) {
		return nil
	}
	rows, err := readAllRows(ctx, q, d)
	if err != nil {
		return err
	}
	d.ch.StopTasks(d.from, copies(rows))
	return nil
}

// holdTasks adds to d's write the update of the held flag of the
// instance's active tasks when d changes it (rules.Change.Hold: a pause,
// a resume, a retry), reading its rows unless the decision had them all.
func holdTasks(ctx context.Context, q store.Querier, d *decided) error {
	if d.tasksOnly || !d.ch.HoldsChange(d.from) {
		return nil
	}
	var rows []*store.Task
	if d.allRows {
		rows = slices.SortedFunc(maps.Values(d.read), byStepOrder)
	} else {
		var err error
		if rows, err = readAllRows(ctx, q, d); err != nil {
			return err
		}
	}
	d.ch.Hold(d.from, copies(rows))
	return nil
}

// readAllRows reads every task row of d's instance for a write that
// changes rows the decision did not read; d.read keeps the rows the
// decision was made on, the guards of its own updates, and gains the
// others.
func readAllRows(ctx context.Context, q store.Querier, d *decided) ([]*store.Task, error) {
	rows, err := q.TasksOfInstance(ctx, d.id)
	if err != nil {
		return nil, err
	}
	if d.read == nil {
		d.read = make(map[string]*store.Task, len(rows))
	}
	for _, r := range rows {
		if d.read[r.ID] == nil {
			d.read[r.ID] = r
		}
	}
	return rows, nil
}

// byStepOrder orders task rows as TasksOfInstance returns them: by step,
// then iteration (the order in which a write's updates lock them).
func byStepOrder(a, b *store.Task) int {
	if c := strings.Compare(a.StepID, b.StepID); c != 0 {
		return c
	}
	return cmp.Compare(a.Iteration, b.Iteration)
}

// stopsOtherTasks reports whether ch, decided by the rules on an instance
// in status from, stops it in a status other than COMPLETED: tasks of
// other steps may then still be active, and the write cancels them.
func stopsOtherTasks(ch *rules.Change, from workflow.Status) bool {
	return ch.FinalStatus() != workflow.StatusCompleted && ch.StopsTasks(from)
}

// tasksOnly is the decision to write task rows alone (no version of
// instance id), guarded as each update says; from, when set, is the status
// the instance must still have.
func tasksOnly(id string, from workflow.Status, notify bool, updates ...rules.TaskUpdate) *decided {
	return &decided{id: id, from: from, tasksOnly: true, ch: rules.Change{Update: updates, Notify: notify}}
}

// byID indexes rows by task id.
func byID(rows ...*store.Task) map[string]*store.Task {
	m := make(map[string]*store.Task, len(rows))
	for _, r := range rows {
		m[r.ID] = r
	}
	return m
}

// terminal is the error of a write to a terminal instance, as the store's
// writes report it.
func terminal(inst *workflow.Instance) error {
	return fmt.Errorf("workflow %q is %s: %w", inst.ID, inst.Status, workflow.ErrTerminal)
}
