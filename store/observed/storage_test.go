package observed_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/metrics"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/store/observed"
	"github.com/flowd/flowd/store/storetest"
	"github.com/flowd/flowd/workflow"
)

// bigState needs new pages wherever it is written.
func bigState() workflow.State {
	blob, _ := json.Marshal(strings.Repeat("x", 256<<10))
	return workflow.State{Variables: map[string]json.RawMessage{"blob": blob}}
}

// The instrumented store reports the database full from a write that failed
// for lack of space until a write stores something again; writes that store
// nothing (an empty claim, which the engine makes all the time) do not count.
func TestStorageFullUntilAWriteSucceeds(t *testing.T) {
	ctx := context.Background()
	base := openSQLiteAt(t, "sqlite:"+t.TempDir()+"/full.db")
	m := metrics.New()
	s := observed.Wrap(base, nil, m)
	full := func() bool { return s.(store.StorageReporter).StorageFull() }
	gauge := func() float64 {
		mfs, err := m.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "flowd_storage_full" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("no flowd_storage_full")
		return -1
	}
	if _, err := s.Create(ctx, store.CreateParams{ID: "w", Status: workflow.StatusRunning}); err != nil {
		t.Fatal(err)
	}
	if full() || gauge() != 0 {
		t.Fatal("full before any write failed")
	}
	if _, err := base.SetMaxPageCount(ctx, 1); err != nil { // clamped to the current size
		t.Fatal(err)
	}
	_, err := storetest.Replace(ctx, s, "w", 0, bigState(), "grow")
	if !errors.Is(err, store.ErrStorageFull) {
		t.Fatalf("a write past max_page_count = %v, want ErrStorageFull", err)
	}
	if !full() || gauge() != 1 {
		t.Fatal("not full after a write failed with ErrStorageFull")
	}
	// An empty claim commits and stores nothing: still full.
	claim := store.ClaimParams{Queues: []string{"none"}, Now: time.Now(), Limit: 1, Owner: "node", Lease: time.Minute}
	if _, _, err := s.ClaimTasks(ctx, claim); err != nil {
		t.Fatal(err)
	}
	if !full() {
		t.Fatal("an empty claim cleared the full flag")
	}
	if _, err := base.SetMaxPageCount(ctx, 1<<30); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, store.CreateParams{ID: "w3", State: bigState()}); err != nil {
		t.Fatal(err)
	}
	if full() || gauge() != 0 {
		t.Fatal("still full after a write succeeded")
	}
}
