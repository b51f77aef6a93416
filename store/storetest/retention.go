package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

var retentionTests = []conformanceTest{
	{"PruneInstances", testPruneInstances},
	{"PruneInstances_perDefinition", testPruneInstancesPerDefinition},
	{"PruneInstances_limit", testPruneInstancesLimit},
	{"PruneInstances_concurrent", testPruneInstancesConcurrent},
	{"PruneInstances_retryRace", testPruneInstancesRetryRace},
	{"Prune_unknownKind", testPruneUnknownKind},
}

// deleteFinished prunes instances and fails t on error; the ids come
// back sorted.
func (b *bundle) deleteFinished(t testing.TB, p store.PruneParams) []string {
	t.Helper()
	ids, err := b.pruneInstances(p)
	if err != nil {
		t.Fatalf("Prune(%+v): %v", p, err)
	}
	if ids == nil {
		t.Errorf("Prune(%+v) returned nil ids, want a non-nil slice", p)
	}
	slices.Sort(ids)
	return ids
}

// pruneInstances is Prune of store.PruneInstances: the ids it deleted,
// checked against its count.
func (b *bundle) pruneInstances(p store.PruneParams) ([]string, error) {
	r, err := b.s.Prune(b.ctx, p)
	if r.Count != len(r.IDs) {
		return r.IDs, fmt.Errorf("Prune(%+v) counted %d instances and returned %d ids", p, r.Count, len(r.IDs))
	}
	return r.IDs, err
}

// prune is Prune of a kind that deletes rows without ids: how many.
func (b *bundle) prune(kind store.PruneKind, before time.Time, limit int) (int, error) {
	r, err := b.s.Prune(b.ctx, store.PruneParams{Kind: kind, Before: before, Limit: limit})
	if r.IDs != nil {
		return r.Count, fmt.Errorf("Prune(kind %d) returned ids %v", kind, r.IDs)
	}
	return r.Count, err
}

// A kind Prune does not know is refused, naming it.
func testPruneUnknownKind(t *testing.T, h Harness) {
	b := setup(t, h)
	for _, kind := range []store.PruneKind{0, store.PruneBulk + 1} {
		_, err := b.s.Prune(b.ctx, store.PruneParams{Kind: kind, Before: b.clock.Now(), Limit: 1})
		wantErrorIs(t, fmt.Sprintf("kind %d", kind), err, store.ErrInvalidArgument)
		if want := fmt.Sprintf("invalid argument: unknown kind of prune %d", kind); err == nil || err.Error() != want {
			t.Errorf("Prune(kind %d) = %v, want %q", kind, err, want)
		}
	}
}

// finishedOf creates an instance of def (no stored revision needed) and
// moves it to status, through RUNNING unless status is PENDING.
func (b *bundle) finishedOf(t testing.TB, id, def string, status workflow.Status) {
	t.Helper()
	b.create(t, store.CreateParams{ID: id, Definition: def, Status: workflow.StatusRunning, State: stepState()})
	switch status {
	case workflow.StatusRunning:
	case workflow.StatusPaused:
		b.transition(t, id, workflow.StatusRunning, workflow.StatusPaused)
	default:
		b.transition(t, id, workflow.StatusRunning, status)
	}
}

// Only finished instances whose updated_at is strictly before the cutoff
// go, each with its history, tasks and idempotency key; live instances of
// any age and recent finished ones stay as they were.
func testPruneInstances(t *testing.T, h Harness) {
	b := setup(t, h)
	var old []string
	for _, status := range workflow.StopStatuses {
		id := "old-" + string(status)
		b.finished(t, id, status)
		old = append(old, id)
	}
	slices.Sort(old)
	b.create(t, store.CreateParams{ID: "old-pending", State: stepState()})
	b.finishedOf(t, "old-running", "", workflow.StatusRunning)
	b.finishedOf(t, "old-paused", "", workflow.StatusPaused)
	cutoff := b.clock.Advance(time.Hour)
	b.finishedOf(t, "at-cutoff", "", workflow.StatusCompleted) // not older than the cutoff
	b.clock.Advance(time.Hour)
	b.finished(t, "recent", workflow.StatusFailed)
	var kept []snapshot
	for _, id := range []string{"old-pending", "old-running", "old-paused", "at-cutoff", "recent"} {
		kept = append(kept, b.snapshot(t, id))
	}

	if got := b.deleteFinished(t, store.PruneParams{Kind: store.PruneInstances, Limit: store.MaxDeleteFinished}); len(got) != 0 {
		t.Errorf("with no cutoff at all (keep forever): deleted %v", got)
	}
	got := b.deleteFinished(t, store.PruneParams{Kind: store.PruneInstances, Before: cutoff, Limit: store.MaxDeleteFinished})
	if !slices.Equal(got, old) {
		t.Errorf("deleted %v, want %v", got, old)
	}
	for _, id := range old {
		b.wantDeleted(t, "expired", id)
		again := b.create(t, store.CreateParams{ID: "again-" + id, IdempotencyKey: "key-" + id, RequestHash: "other"})
		if again.ID != "again-"+id {
			t.Errorf("the key of deleted %s made %s", id, again.ID)
		}
	}
	for _, snap := range kept {
		b.unchanged(t, "kept "+snap.inst.ID, snap)
	}
	if n := len(b.tasksOf(t, b.engine(t), "recent")); n != 2 {
		t.Errorf("recent: %d tasks, want 2", n)
	}
	if got := b.deleteFinished(t, store.PruneParams{Kind: store.PruneInstances, Before: cutoff, Limit: store.MaxDeleteFinished}); len(got) != 0 {
		t.Errorf("a second call deleted %v, want nothing", got)
	}
}

// A definition's own cutoff replaces Before for its instances, the zero
// time keeps them; free-form instances and those of other definitions
// follow Before, and Before's zero time keeps them.
func testPruneInstancesPerDefinition(t *testing.T, h Harness) {
	b := setup(t, h)
	t0 := b.clock.Now()
	// One finished instance of each definition at t0, t0+1h, …, t0+4h.
	defs := []string{"", "short", "long", "keep", "other"}
	for hour := range 5 {
		for _, def := range defs {
			b.finishedOf(t, fmt.Sprintf("%s-%d", cmpName(def), hour), def, workflow.StatusCompleted)
		}
		b.clock.Advance(time.Hour)
	}
	p := store.PruneParams{Kind: store.PruneInstances,
		Before: t0.Add(150 * time.Minute), // hours 0, 1, 2
		Definitions: map[string]time.Time{
			"short": t0.Add(270 * time.Minute), // hours 0–4
			"long":  t0.Add(30 * time.Minute),  // hour 0
			"keep":  {},
		},
		Limit: store.MaxDeleteFinished,
	}
	got := b.deleteFinished(t, p)
	want := []string{"free-0", "free-1", "free-2", "long-0", "other-0", "other-1", "other-2",
		"short-0", "short-1", "short-2", "short-3", "short-4"}
	if !slices.Equal(got, want) {
		t.Errorf("deleted %v, want %v", got, want)
	}
	for _, id := range want {
		if _, err := b.s.Get(b.ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get(%s) after its delete: %v, want ErrNotFound", id, err)
		}
	}
	for _, id := range []string{"free-3", "long-1", "long-4", "keep-0", "keep-4", "other-3"} {
		b.get(t, id)
	}

	// Keeping by default, deleting one definition's instances only.
	got = b.deleteFinished(t, store.PruneParams{Kind: store.PruneInstances, Definitions: map[string]time.Time{"long": b.clock.Now()}, Limit: store.MaxDeleteFinished})
	if want := []string{"long-1", "long-2", "long-3", "long-4"}; !slices.Equal(got, want) {
		t.Errorf("with only long's cutoff: deleted %v, want %v", got, want)
	}
	if got := b.deleteFinished(t, store.PruneParams{Kind: store.PruneInstances, Definitions: map[string]time.Time{"keep": {}, "absent": b.clock.Now()}, Limit: 10}); len(got) != 0 {
		t.Errorf("keeping every instance of the definitions that have some: deleted %v", got)
	}
}

// cmpName names the instances of the free-form "definition".
func cmpName(def string) string {
	if def == "" {
		return "free"
	}
	return def
}

// Limit bounds each call; an out-of-range limit deletes nothing.
func testPruneInstancesLimit(t *testing.T, h Harness) {
	b := setup(t, h)
	for i := range 5 {
		b.finishedOf(t, fmt.Sprintf("w%d", i), "", workflow.StatusCancelled)
	}
	cutoff := b.clock.Advance(time.Minute)
	for _, limit := range []int{0, -1, store.MaxDeleteFinished + 1} {
		ids, err := b.pruneInstances(store.PruneParams{Kind: store.PruneInstances, Before: cutoff, Limit: limit})
		wantErrorIs(t, fmt.Sprintf("limit %d", limit), err, store.ErrInvalidArgument)
		if len(ids) != 0 {
			t.Errorf("limit %d: deleted %v", limit, ids)
		}
	}
	if n := b.countAll(t); n != 5 {
		t.Fatalf("after refused calls: %d instances, want 5", n)
	}
	var all []string
	for _, want := range []int{2, 2, 1, 0} {
		got := b.deleteFinished(t, store.PruneParams{Kind: store.PruneInstances, Before: cutoff, Limit: 2})
		if len(got) != want {
			t.Errorf("deleted %v, want %d ids", got, want)
		}
		all = append(all, got...)
	}
	slices.Sort(all)
	if want := []string{"w0", "w1", "w2", "w3", "w4"}; !slices.Equal(all, want) {
		t.Errorf("all calls deleted %v, want %v", all, want)
	}
	b.wantEmpty(t, "after every batch")
}

// Concurrent calls (the sweeps of several nodes) delete every expired
// instance exactly once: no id comes back twice.
func testPruneInstancesConcurrent(t *testing.T, h Harness) {
	b := setup(t, h)
	const n, callers = 60, 4
	want := make([]string, n)
	for i := range n {
		want[i] = fmt.Sprintf("w%02d", i)
		b.finishedOf(t, want[i], "", workflow.StopStatuses[i%len(workflow.StopStatuses)])
	}
	b.finishedOf(t, "live", "", workflow.StatusRunning)
	cutoff := b.clock.Advance(time.Minute)
	var (
		mu   sync.Mutex
		got  []string
		wg   sync.WaitGroup
		errs = make(chan error, callers)
	)
	for range callers {
		wg.Go(func() {
			for {
				ids, err := b.pruneInstances(store.PruneParams{Kind: store.PruneInstances, Before: cutoff, Limit: 7})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				got = append(got, ids...)
				mu.Unlock()
				if len(ids) == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Prune(instances): %v", err)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("concurrent calls deleted %d ids %v, want each of %d exactly once", len(got), got, n)
	}
	if n := b.countAll(t); n != 1 {
		t.Errorf("%d instances left, want only the live one", n)
	}
}

// A retry (FAILED → RUNNING) racing the sweep: the instance is either
// deleted (and the retry finds nothing) or retried (and stays, live).
func testPruneInstancesRetryRace(t *testing.T, h Harness) {
	b := setup(t, h)
	const rounds = 20
	for i := range rounds {
		id := fmt.Sprintf("race-%d", i)
		b.finished(t, id, workflow.StatusFailed)
		cutoff := b.clock.Advance(time.Minute)
		var (
			wg       sync.WaitGroup
			deleted  []string
			sweepErr error
			retryErr error
		)
		wg.Go(func() {
			deleted, sweepErr = b.pruneInstances(store.PruneParams{Kind: store.PruneInstances, Before: cutoff, Limit: 10})
		})
		wg.Go(func() {
			_, retryErr = Transition(b.ctx, b.s, store.TransitionParams{ID: id, From: workflow.StatusFailed, To: workflow.StatusRunning})
		})
		wg.Wait()
		if sweepErr != nil {
			t.Fatalf("%s: Prune(instances): %v", id, sweepErr)
		}
		switch {
		case slices.Equal(deleted, []string{id}):
			wantErrorIs(t, id+": retry after the sweep", retryErr, store.ErrNotFound)
			b.wantDeleted(t, id, id)
		case len(deleted) == 0 && retryErr == nil:
			if got := b.get(t, id); got.Status != workflow.StatusRunning {
				t.Errorf("%s: status %s after the retry won, want RUNNING", id, got.Status)
			}
			b.transition(t, id, workflow.StatusRunning, workflow.StatusCompleted)
			b.clock.Advance(time.Minute)
			if got := b.deleteFinished(t, store.PruneParams{Kind: store.PruneInstances, Before: b.clock.Now(), Limit: 10}); !slices.Equal(got, []string{id}) {
				t.Errorf("%s: once finished again: deleted %v", id, got)
			}
		default:
			t.Errorf("%s: sweep deleted %v, retry %v", id, deleted, retryErr)
		}
	}
}
