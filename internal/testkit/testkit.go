// Package testkit holds test helpers that several packages' tests share.
package testkit

import (
	"bytes"
	"sync"
	"testing"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// SyncBuffer collects output written from several goroutines (progress
// lines, a child process's output, logs).
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// CheckStepsSettleOnce asserts, over an instance's history, that a step once
// COMPLETED never changes again (its completion was applied exactly once)
// and that attempt counts never go down.
func CheckStepsSettleOnce(t testing.TB, id string, h []store.HistoryEntry) {
	t.Helper()
	for i := 1; i < len(h); i++ {
		for name, prev := range h[i-1].State.Steps {
			cur := h[i].State.Steps[name]
			if cur == nil {
				t.Errorf("%s v%d: step %s vanished", id, h[i].Version, name)
				continue
			}
			if cur.Attempts < prev.Attempts {
				t.Errorf("%s v%d: step %s attempts went from %d to %d", id, h[i].Version, name, prev.Attempts, cur.Attempts)
			}
			if prev.Status == workflow.StepCompleted &&
				(cur.Status != workflow.StepCompleted || !bytes.Equal(cur.Output, prev.Output)) {
				t.Errorf("%s v%d (%s): completed step %s changed: %s %s → %s %s",
					id, h[i].Version, h[i].Cause, name, prev.Status, prev.Output, cur.Status, cur.Output)
			}
		}
	}
}
