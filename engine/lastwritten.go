package engine

import (
	"sync"

	"github.com/flowd/flowd/workflow"
)

// lastWritten keeps, for the instances the committers wrote last, the
// instance as the write left it. A worker's completion is decided on the
// instance as its task's lease left it; when the instance has moved on
// since (the other iterations of a foreach, completed meanwhile), the
// committers decide the completion again on the instance as they last
// wrote it instead of writing a sure conflict, which would be read and
// decided again on its own. What it keeps is only ever a starting point:
// every write stays guarded by the version it was decided on, so an
// instance another node moved since conflicts as before.
type lastWritten struct {
	mu sync.Mutex
	m  map[string]*workflow.Instance
}

// maxLastWritten bounds the instances kept: those of the last few batches
// are the ones completions still arrive for.
const maxLastWritten = 256

// get returns the instance id as the committers last wrote it, or nil.
func (l *lastWritten) get(id string) *workflow.Instance {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m[id]
}

// put keeps inst, as a committer's write left it, while it runs; an
// instance the committers stopped is forgotten. One stopped by another
// writer (a cancel, a timeout) stays until it is pushed out, and is never
// used again: a write decided on it would conflict, and an instance
// started later with the same id is another instance (the committers
// compare CreatedAt) and replaces it here.
func (l *lastWritten) put(inst *workflow.Instance) {
	if inst == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if inst.Status != workflow.StatusRunning {
		delete(l.m, inst.ID)
		return
	}
	if old := l.m[inst.ID]; old != nil && old.CreatedAt.Equal(inst.CreatedAt) && old.Version >= inst.Version {
		return
	}
	if l.m == nil {
		l.m = make(map[string]*workflow.Instance)
	}
	if _, kept := l.m[inst.ID]; !kept && len(l.m) >= maxLastWritten {
		for id := range l.m { // any one: the map's order is arbitrary
			delete(l.m, id)
			break
		}
	}
	l.m[inst.ID] = inst
}
