package engine

import (
	"maps"
	"sync"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// runCursors keep, for the code workflow runs this node serves, the
// instance and the run's task row as the run's last write (or its claim)
// left them. A run is its instance's only writer while it holds its lease,
// so its next checkpoint is decided on that instance without reading it
// again: reading it would assemble every step recorded so far, and a
// checkpoint would cost the journal instead of its step. What a cursor
// keeps is only ever a starting point: the write stays guarded by the
// instance's version and the row's lease, and anything that moved in
// between (a pause, a PATCH, a heartbeat, another node's write) makes it
// conflict, and the request is then read and decided again.
type runCursors struct {
	mu sync.Mutex
	m  map[string]*runCursor // by task id
}

// runCursor is one run's instance and task row as its last write left them.
type runCursor struct {
	lease string
	inst  *workflow.Instance
	row   store.Task
	// stateLen is the length of inst's state as stored (0: not known).
	stateLen int
}

// maxRunCursors bounds the runs kept: more runs than that at once on one
// node read their instance for some of their checkpoints.
const maxRunCursors = 1024

// get returns the cursor of the run holding lease on task taskID, or nil.
func (r *runCursors) get(taskID, lease string) *runCursor {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.m[taskID]
	if c == nil || c.lease != lease {
		return nil
	}
	return c
}

// put keeps inst and row as the run's last write left them, and the
// length of the state it stored (0: not known); an instance that no
// longer runs the run is forgotten.
func (r *runCursors) put(inst *workflow.Instance, row *store.Task, stateLen int) {
	if inst == nil || row == nil || row.Lease == "" || row.Status != store.TaskLeased {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if inst.Status != workflow.StatusRunning {
		delete(r.m, row.ID)
		return
	}
	if old := r.m[row.ID]; old != nil && old.lease == row.Lease && old.inst.Version > inst.Version {
		// Parallel steps' checkpoints report in any order: the cursor
		// keeps the latest write.
		return
	}
	if r.m == nil {
		r.m = make(map[string]*runCursor)
	}
	if _, kept := r.m[row.ID]; !kept && len(r.m) >= maxRunCursors {
		for id := range r.m { // any one: the map's order is arbitrary
			delete(r.m, id)
			break
		}
	}
	r.m[row.ID] = &runCursor{lease: row.Lease, inst: inst, row: *row, stateLen: stateLen}
}

// extended notes a heartbeat's new lease end on the run's row.
func (r *runCursors) extended(taskID, lease string, until time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := r.m[taskID]; c != nil && c.lease == lease {
		next := *c
		next.row.LeaseUntil = until
		r.m[taskID] = &next
	}
}

// drop forgets the run of task taskID: it ended, or its cursor is not to
// be trusted.
func (r *runCursors) drop(taskID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, taskID)
}

// fromCursor gives t, a run's task, the instance and row its cursor
// keeps, if any: its completion is then decided on them (commitCompletion)
// instead of reading them, and shares the committers' commit.
func (e *Engine) fromCursor(t *leased) {
	if cur := e.runs.get(t.ID, t.Lease); cur != nil {
		row := cur.row
		t.inst, t.row = cur.inst, &row
	}
}

// shallowWork is inst as a decision about a run's request changes it:
// with maps of its own, and the step records shared with inst's. The
// decisions made on it (a checkpoint, a set) never change a record in
// place (they put a new one), so a record shared here stays as written;
// copying them would cost every step recorded.
func shallowWork(inst *workflow.Instance) *workflow.Instance {
	w := *inst
	w.State.Steps = maps.Clone(inst.State.Steps)
	if w.State.Steps == nil {
		w.State.Steps = map[string]*workflow.StepState{}
	}
	w.State.Variables = maps.Clone(inst.State.Variables)
	w.State.Extra = maps.Clone(inst.State.Extra)
	return &w
}
