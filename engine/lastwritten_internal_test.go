package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/flowd/flowd/workflow"
)

// lastWritten keeps the newest version of each running instance, forgets
// one that stopped, takes a later instance of the same id over an earlier
// one whatever their versions, and stays bounded.
func TestLastWritten(t *testing.T) {
	var l lastWritten
	at := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	inst := func(id string, created time.Time, version int64, status workflow.Status) *workflow.Instance {
		return &workflow.Instance{ID: id, CreatedAt: created, Version: version, Status: status}
	}
	l.put(inst("a", at, 5, workflow.StatusRunning))
	l.put(inst("a", at, 4, workflow.StatusRunning)) // an older answer, late
	if got := l.get("a"); got == nil || got.Version != 5 {
		t.Fatalf("get(a) = %+v, want version 5", got)
	}
	// Deleted and started again under the same id: a lower version, but
	// the other instance.
	later := at.Add(time.Minute)
	l.put(inst("a", later, 2, workflow.StatusRunning))
	if got := l.get("a"); got == nil || !got.CreatedAt.Equal(later) || got.Version != 2 {
		t.Fatalf("get(a) after a new instance of the id = %+v, want the new one at version 2", got)
	}
	l.put(inst("a", later, 3, workflow.StatusCompleted))
	if got := l.get("a"); got != nil {
		t.Fatalf("get(a) after it completed = %+v, want nil", got)
	}
	for i := range maxLastWritten + 10 {
		l.put(inst(fmt.Sprint(i), at, 1, workflow.StatusRunning))
	}
	if n := len(l.m); n > maxLastWritten {
		t.Fatalf("%d instances kept, at most %d", n, maxLastWritten)
	}
	if got := l.get(fmt.Sprint(maxLastWritten + 9)); got == nil {
		t.Error("the instance put last was pushed out")
	}
}
