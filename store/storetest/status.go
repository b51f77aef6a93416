package storetest

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

var transitionTests = []conformanceTest{
	{"TransitionStatus_ok", testTransitionStatusOK},
	{"TransitionStatus_invalidTransition", testTransitionStatusInvalidTransition},
	{"TransitionStatus_notFound", testTransitionStatusNotFound},
	{"TransitionStatus_mismatch", testTransitionStatusMismatch},
	{"TransitionStatus_expectedVersion", testTransitionStatusExpectedVersion},
	{"TransitionStatus_race", testTransitionStatusRace},
}

var batchTests = []conformanceTest{
	{"BatchUpdateStatus_ok", testBatchUpdateStatusOK},
	{"BatchUpdateStatus_empty", testBatchUpdateStatusEmpty},
	{"BatchUpdateStatus_invalidArguments", testBatchUpdateStatusInvalidArguments},
	{"BatchUpdateStatus_concurrent", testBatchUpdateStatusConcurrent},
	{"BatchUpdateStatus_ids", testBatchUpdateStatusIDs},
}

// testBatchUpdateStatusIDs: with IDs, a batch moves only those of them
// that still have its status (and its cut-off), oldest first; ids of
// other instances, or of none, change nothing; more ids than a batch may
// hold are refused.
func testBatchUpdateStatusIDs(t *testing.T, h Harness) {
	b := setup(t, h)
	f := b.newBatchFixture(t)
	before := map[string]snapshot{}
	for _, id := range append(slices.Clone(f.movable), f.others...) {
		before[id] = b.snapshot(t, id)
	}
	b.clock.Set(f.t0.Add(time.Hour))
	p := store.BatchStatusParams{Status: workflow.StatusRunning, UpdatedBefore: f.cutoff, NewStatus: workflow.StatusCancelled, Limit: 100,
		IDs: []string{"r4", "u1", "paused", "late", "nobody", "a\x00b"}}
	got, err := Batch(b.ctx, b.s, p)
	if err != nil {
		t.Fatalf("BatchUpdateStatus with ids: %v", err)
	}
	if want := []string{"u1", "r4"}; !slices.Equal(got, want) {
		t.Errorf("BatchUpdateStatus with ids = %v, want %v", got, want)
	}
	for _, id := range got {
		if inst := b.get(t, id); inst.Status != workflow.StatusCancelled || inst.Version != before[id].inst.Version+1 {
			t.Errorf("%s: %s at version %d", id, inst.Status, inst.Version)
		}
	}
	for id, snap := range before {
		if id != "u1" && id != "r4" {
			b.unchanged(t, "instance "+id+" outside the ids", snap)
		}
	}
	again, err := Batch(b.ctx, b.s, p)
	if err != nil || len(again) != 0 {
		t.Errorf("the same batch again = %v, %v; want nothing moved", again, err)
	}
	p.IDs = make([]string, store.MaxBatchLimit+1)
	for i := range p.IDs {
		p.IDs[i] = fmt.Sprintf("i%d", i)
	}
	_, err = Batch(b.ctx, b.s, p)
	wantErrorIs(t, "a batch of more ids than MaxBatchLimit", err, store.ErrInvalidArgument)
}

func testTransitionStatusOK(t *testing.T, h Harness) {
	b := setup(t, h)
	// Every allowed transition of the table, each on its own instance.
	for _, from := range workflow.Statuses {
		for _, to := range workflow.Statuses {
			if !workflow.CanTransition(from, to) {
				continue
			}
			b.clock.Set(clockStart)
			inst := b.create(t, store.CreateParams{Status: from, State: counterState(5)})
			now := b.clock.Advance(time.Minute + 3)
			got, err := Transition(b.ctx, b.s, store.TransitionParams{ID: inst.ID, From: from, To: to})
			if err != nil {
				t.Errorf("TransitionStatus %s → %s: %v", from, to, err)
				continue
			}
			want := withVersion(inst, now, to, stoppedAs(counterState(5), to))
			assertInstance(t, fmt.Sprintf("TransitionStatus %s → %s", from, to), want, got)
			assertInstance(t, fmt.Sprintf("Get after TransitionStatus %s → %s", from, to), want, b.get(t, inst.ID))
			assertHistory(t, fmt.Sprintf("History after %s → %s", from, to), []store.HistoryEntry{
				{Version: 0, Status: from, State: counterState(5), At: store.Timestamp(clockStart), Cause: "create"},
				{Version: 1, Status: to, State: stoppedAs(counterState(5), to), At: store.Timestamp(now), Cause: fmt.Sprintf("status %s→%s", from, to)},
			}, b.history(t, inst.ID))
		}
	}
	// A custom cause and a matching expected version.
	inst := b.create(t, store.CreateParams{Status: workflow.StatusRunning})
	v := inst.Version
	got, err := Transition(b.ctx, b.s, store.TransitionParams{ID: inst.ID, From: workflow.StatusRunning, To: workflow.StatusPaused, ExpectedVersion: &v, Cause: "operator pause"})
	if err != nil {
		t.Fatalf("TransitionStatus with the expected version: %v", err)
	}
	if got.Version != 1 || got.Status != workflow.StatusPaused {
		t.Errorf("TransitionStatus = version %d, status %s; want 1, PAUSED", got.Version, got.Status)
	}
	if hist := b.history(t, inst.ID); len(hist) != 2 || hist[1].Cause != "operator pause" {
		t.Errorf("history = %+v, want a second row with cause \"operator pause\"", hist)
	}
}

func testTransitionStatusInvalidTransition(t *testing.T, h Harness) {
	b := setup(t, h)
	for _, from := range workflow.Statuses {
		var snap *snapshot
		if !from.Terminal() {
			s := b.snapshot(t, b.create(t, store.CreateParams{Status: from}).ID)
			snap = &s
		}
		for _, to := range workflow.Statuses {
			if workflow.CanTransition(from, to) {
				continue
			}
			// Rejected before any I/O: an unknown id does not turn it into 404.
			got, err := Transition(b.ctx, b.s, store.TransitionParams{ID: "does-not-exist", From: from, To: to})
			wantErrorIs(t, fmt.Sprintf("TransitionStatus %s → %s on an unknown id", from, to), err, workflow.ErrInvalidTransition)
			wantNilInstance(t, "TransitionStatus", got)
			if snap != nil {
				got, err = Transition(b.ctx, b.s, store.TransitionParams{ID: snap.inst.ID, From: from, To: to})
				wantErrorIs(t, fmt.Sprintf("TransitionStatus %s → %s", from, to), err, workflow.ErrInvalidTransition)
				wantNilInstance(t, "TransitionStatus", got)
			}
		}
		if snap != nil {
			b.unchanged(t, "invalid transitions from "+string(from), *snap)
		}
	}
	for _, p := range []store.TransitionParams{
		{ID: "x", From: "NOPE", To: workflow.StatusRunning},
		{ID: "x", From: workflow.StatusPending, To: "running"},
	} {
		_, err := Transition(b.ctx, b.s, p)
		wantErrorIs(t, fmt.Sprintf("TransitionStatus %q → %q", p.From, p.To), err, store.ErrInvalidArgument)
	}
}

func testTransitionStatusNotFound(t *testing.T, h Harness) {
	b := setup(t, h)
	v := int64(0)
	for _, p := range []store.TransitionParams{
		{ID: "missing", From: workflow.StatusPending, To: workflow.StatusRunning},
		{ID: "missing", From: workflow.StatusRunning, To: workflow.StatusPaused, ExpectedVersion: &v},
	} {
		got, err := Transition(b.ctx, b.s, p)
		wantErrorIs(t, "TransitionStatus on an unknown id", err, store.ErrNotFound)
		wantNilInstance(t, "TransitionStatus on an unknown id", got)
	}
	b.wantEmpty(t, "TransitionStatus on an unknown id")
}

func testTransitionStatusMismatch(t *testing.T, h Harness) {
	b := setup(t, h)
	running := b.create(t, store.CreateParams{Status: workflow.StatusRunning, State: counterState(1)})
	completed := b.terminalInstance(t, workflow.StatusCompleted)
	stale := int64(9)
	for _, c := range []struct {
		inst     *workflow.Instance
		from, to workflow.Status
		version  *int64
	}{
		{running, workflow.StatusPending, workflow.StatusRunning, nil},
		{running, workflow.StatusPaused, workflow.StatusRunning, nil},
		{running, workflow.StatusFailed, workflow.StatusRunning, nil},
		// The status mismatch wins over a stale version.
		{running, workflow.StatusPaused, workflow.StatusCancelled, &stale},
		{completed, workflow.StatusRunning, workflow.StatusPaused, nil},
		{completed, workflow.StatusRunning, workflow.StatusCompleted, &stale},
	} {
		snap := b.snapshot(t, c.inst.ID)
		what := fmt.Sprintf("TransitionStatus %s → %s on a %s instance", c.from, c.to, c.inst.Status)
		got, err := Transition(b.ctx, b.s, store.TransitionParams{ID: c.inst.ID, From: c.from, To: c.to, ExpectedVersion: c.version})
		wantMismatch(t, what, err, c.inst.ID, c.from, c.inst.Status)
		wantNilInstance(t, what, got)
		b.unchanged(t, what, snap)
	}
}

func testTransitionStatusExpectedVersion(t *testing.T, h Harness) {
	b := setup(t, h)
	inst := b.create(t, store.CreateParams{})
	inst = b.transition(t, inst.ID, workflow.StatusPending, workflow.StatusRunning)
	snap := b.snapshot(t, inst.ID)
	for _, v := range []int64{0, 2, 100} {
		got, err := Transition(b.ctx, b.s, store.TransitionParams{ID: inst.ID, From: workflow.StatusRunning, To: workflow.StatusPaused, ExpectedVersion: &v})
		wantConflict(t, fmt.Sprintf("TransitionStatus expecting version %d", v), err, inst.ID, v, 1)
		wantNilInstance(t, "TransitionStatus with a stale version", got)
	}
	b.unchanged(t, "TransitionStatus with a stale version", snap)
	v := int64(1)
	got, err := Transition(b.ctx, b.s, store.TransitionParams{ID: inst.ID, From: workflow.StatusRunning, To: workflow.StatusPaused, ExpectedVersion: &v})
	if err != nil || got.Version != 2 || got.Status != workflow.StatusPaused {
		t.Errorf("TransitionStatus expecting the current version = %+v, %v; want version 2, PAUSED", got, err)
	}
}

func testTransitionStatusRace(t *testing.T, h Harness) {
	b := setup(t, h)
	inst := b.create(t, store.CreateParams{Status: workflow.StatusRunning, State: counterState(0)})
	before := len(b.history(t, inst.ID))
	const racers = 16
	errs := make([]error, racers)
	runConcurrently(racers, func(i int) {
		_, errs[i] = Transition(b.ctx, b.s, store.TransitionParams{ID: inst.ID, From: workflow.StatusRunning, To: workflow.StatusPaused})
	})
	won := 0
	for _, err := range errs {
		if err == nil {
			won++
			continue
		}
		wantMismatch(t, "a losing racer", err, inst.ID, workflow.StatusRunning, workflow.StatusPaused)
	}
	if won != 1 {
		t.Errorf("%d of %d racers moved RUNNING → PAUSED, want exactly 1", won, racers)
	}
	got := b.get(t, inst.ID)
	if got.Version != inst.Version+1 || got.Status != workflow.StatusPaused {
		t.Errorf("after the race: version %d, status %s; want %d, PAUSED", got.Version, got.Status, inst.Version+1)
	}
	if after := len(b.history(t, inst.ID)); after != before+1 {
		t.Errorf("the race added %d history rows, want 1", after-before)
	}
}

// batchFixture is a set of instances at known updated_at times.
type batchFixture struct {
	t0      time.Time
	cutoff  time.Time
	movable []string // RUNNING and updated before the cutoff, oldest first
	others  []string // must never move
}

func (b *bundle) newBatchFixture(t testing.TB) batchFixture {
	t.Helper()
	t0 := clockStart
	// The cutoff is a whole microsecond (what a sub-microsecond cutoff means is
	// not part of the contract) in a zone other than UTC (it is an instant).
	f := batchFixture{t0: t0, cutoff: store.Timestamp(t0.Add(5 * time.Minute)).In(t0.Location())}
	running := store.CreateParams{Status: workflow.StatusRunning, State: counterState(0)}
	at := func(d time.Duration, p store.CreateParams) string {
		return b.createAt(t, t0.Add(d), p).id
	}
	withID := func(id string, p store.CreateParams) store.CreateParams { p.ID = id; return p }

	// Created first but updated later: the order is updated_at, not created_at.
	b.createAt(t, t0.Add(-2*time.Hour), withID("u1", running))
	b.clock.Set(t0.Add(30 * time.Second))
	if _, err := Modify(b.ctx, b.s, "u1", func(cur *workflow.Instance) error { return nil }, "touch"); err != nil {
		t.Fatalf("ModifyState: %v", err)
	}
	// Created before the cutoff, updated after it.
	b.createAt(t, t0.Add(-time.Hour), withID("touched", running))
	b.clock.Set(t0.Add(20 * time.Minute))
	if _, err := Modify(b.ctx, b.s, "touched", func(cur *workflow.Instance) error { return nil }, "touch"); err != nil {
		t.Fatalf("ModifyState: %v", err)
	}
	f.others = append(f.others, "touched")

	r0 := at(0, withID("r0", running))
	r1 := at(time.Minute, withID("r1", running))
	// A tie on updated_at, created out of id order.
	rz := at(2*time.Minute, withID("r2-z", running))
	ry := at(2*time.Minute, withID("r2-y", running))
	r4 := at(3*time.Minute, withID("r4", running))
	r5 := at(4*time.Minute+time.Second-1, withID("r5", running))
	f.movable = []string{r0, "u1", r1, ry, rz, r4, r5}
	f.others = append(f.others,
		at(5*time.Minute, withID("edge", running)), // updated_at == cutoff is not before it
		at(10*time.Minute, withID("late", running)),
		at(0, withID("paused", store.CreateParams{Status: workflow.StatusPaused})),
		at(0, withID("pending", store.CreateParams{Status: workflow.StatusPending})),
	)
	return f
}

func testBatchUpdateStatusOK(t *testing.T, h Harness) {
	b := setup(t, h)
	f := b.newBatchFixture(t)
	before := map[string]snapshot{}
	for _, id := range append(slices.Clone(f.movable), f.others...) {
		before[id] = b.snapshot(t, id)
	}
	now := b.clock.Set(f.t0.Add(time.Hour))

	check := func(call string, got []string, want []string, cause string) {
		t.Helper()
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: ids (-want +got):\n%s", call, diff)
		}
		for _, id := range want {
			old := before[id].inst
			wantInst := withVersion(old, now, workflow.StatusPaused, old.State)
			assertInstance(t, call+": "+id, wantInst, b.get(t, id))
			wantHist := append(slices.Clone(before[id].history), store.HistoryEntry{
				Version: old.Version + 1, Status: workflow.StatusPaused, State: old.State, At: store.Timestamp(now), Cause: cause,
			})
			assertHistory(t, call+": history of "+id, wantHist, b.history(t, id))
		}
	}
	p := store.BatchStatusParams{Status: workflow.StatusRunning, UpdatedBefore: f.cutoff, NewStatus: workflow.StatusPaused, Limit: 3}
	got, err := Batch(b.ctx, b.s, p)
	if err != nil {
		t.Fatalf("BatchUpdateStatus: %v", err)
	}
	check("first batch (limit 3)", got, f.movable[:3], "batch RUNNING→PAUSED")

	p.Limit, p.Cause = 100, "sweep"
	got, err = Batch(b.ctx, b.s, p)
	if err != nil {
		t.Fatalf("BatchUpdateStatus: %v", err)
	}
	check("second batch (limit 100)", got, f.movable[3:], "sweep")

	got, err = Batch(b.ctx, b.s, p)
	if err != nil {
		t.Fatalf("BatchUpdateStatus: %v", err)
	}
	if got == nil || len(got) != 0 {
		t.Errorf("third batch = %#v, want an empty, non-nil slice", got)
	}
	for _, id := range f.others {
		b.unchanged(t, "instance "+id+" outside the batch", before[id])
	}
}

func testBatchUpdateStatusEmpty(t *testing.T, h Harness) {
	b := setup(t, h)
	p := store.BatchStatusParams{Status: workflow.StatusRunning, UpdatedBefore: clockStart.Add(time.Hour), NewStatus: workflow.StatusTimedOut, Limit: 10}
	got, err := Batch(b.ctx, b.s, p)
	if err != nil || got == nil || len(got) != 0 {
		t.Errorf("BatchUpdateStatus on an empty database = %#v, %v; want []string{}, nil", got, err)
	}
	// Matching status but nothing old enough.
	b.create(t, store.CreateParams{Status: workflow.StatusRunning})
	p.UpdatedBefore = clockStart.Add(-time.Hour)
	got, err = Batch(b.ctx, b.s, p)
	if err != nil || got == nil || len(got) != 0 {
		t.Errorf("BatchUpdateStatus with nothing old enough = %#v, %v; want []string{}, nil", got, err)
	}
}

func testBatchUpdateStatusInvalidArguments(t *testing.T, h Harness) {
	b := setup(t, h)
	inst := b.create(t, store.CreateParams{Status: workflow.StatusRunning})
	pending := b.create(t, store.CreateParams{})
	snaps := []snapshot{b.snapshot(t, inst.ID), b.snapshot(t, pending.ID)}
	cutoff := clockStart.Add(time.Hour)
	ok := store.BatchStatusParams{Status: workflow.StatusRunning, UpdatedBefore: cutoff, NewStatus: workflow.StatusPaused, Limit: 10}
	with := func(change func(*store.BatchStatusParams)) store.BatchStatusParams { p := ok; change(&p); return p }
	for _, c := range []struct {
		p    store.BatchStatusParams
		want error
	}{
		{with(func(p *store.BatchStatusParams) { p.Limit = 0 }), store.ErrInvalidArgument},
		{with(func(p *store.BatchStatusParams) { p.Limit = -1 }), store.ErrInvalidArgument},
		{with(func(p *store.BatchStatusParams) { p.Limit = store.MaxBatchLimit + 1 }), store.ErrInvalidArgument},
		{with(func(p *store.BatchStatusParams) { p.Status = "NOPE" }), store.ErrInvalidArgument},
		{with(func(p *store.BatchStatusParams) { p.NewStatus = "" }), store.ErrInvalidArgument},
		{with(func(p *store.BatchStatusParams) { p.Status = workflow.StatusPending }), workflow.ErrInvalidTransition},
		{with(func(p *store.BatchStatusParams) { p.NewStatus = workflow.StatusRunning }), workflow.ErrInvalidTransition},
		{with(func(p *store.BatchStatusParams) {
			p.Status, p.NewStatus = workflow.StatusCompleted, workflow.StatusRunning
		}), workflow.ErrInvalidTransition},
	} {
		got, err := Batch(b.ctx, b.s, c.p)
		wantErrorIs(t, fmt.Sprintf("BatchUpdateStatus(%+v)", c.p), err, c.want)
		if len(got) != 0 {
			t.Errorf("BatchUpdateStatus(%+v) returned ids %v with an error", c.p, got)
		}
	}
	for _, s := range snaps {
		b.unchanged(t, "invalid batches", s)
	}
	got, err := Batch(b.ctx, b.s, with(func(p *store.BatchStatusParams) { p.Limit = store.MaxBatchLimit }))
	if err != nil || !slices.Equal(got, []string{inst.ID}) {
		t.Errorf("BatchUpdateStatus with limit %d = %v, %v; want [%s]", store.MaxBatchLimit, got, err, inst.ID)
	}
}

func testBatchUpdateStatusConcurrent(t *testing.T, h Harness) {
	b := setup(t, h)
	// Four batches' worth of rows for four goroutines: they overlap on
	// the same candidates, which is what the check needs at any size.
	const rows, workers, limit = 40, 4, 10
	all := map[string]bool{}
	for i := range rows {
		all[b.createAt(t, clockStart.Add(time.Duration(i)*time.Millisecond), store.CreateParams{Status: workflow.StatusRunning}).id] = true
	}
	b.clock.Set(clockStart.Add(time.Hour))
	p := store.BatchStatusParams{Status: workflow.StatusRunning, UpdatedBefore: clockStart.Add(time.Minute), NewStatus: workflow.StatusPaused, Limit: limit}
	var (
		mu    sync.Mutex
		seen  = map[string]int{}
		calls atomic.Int64
	)
	runConcurrently(workers, func(int) {
		for range rows { // bounded: every non-empty call moves at least one row
			ids, err := Batch(b.ctx, b.s, p)
			calls.Add(1)
			if err != nil {
				t.Errorf("concurrent BatchUpdateStatus: %v", err)
				return
			}
			if len(ids) > limit {
				t.Errorf("a batch returned %d ids, limit is %d", len(ids), limit)
			}
			if len(ids) == 0 {
				return
			}
			mu.Lock()
			for _, id := range ids {
				seen[id]++
			}
			mu.Unlock()
		}
	})
	t.Logf("%d batch calls by %d goroutines", calls.Load(), workers)
	for id, n := range seen {
		if n != 1 {
			t.Errorf("id %s was returned by %d batches, want 1", id, n)
		}
		if !all[id] {
			t.Errorf("id %s was returned but is not one of the rows", id)
		}
	}
	if len(seen) != rows {
		t.Errorf("the batches moved %d distinct rows, want all %d", len(seen), rows)
	}
	for id := range all {
		inst := b.get(t, id)
		if inst.Status != workflow.StatusPaused || inst.Version != 1 {
			t.Errorf("row %s: status %s, version %d; want PAUSED, 1", id, inst.Status, inst.Version)
		}
		if n := len(b.history(t, id)); n != 2 {
			t.Errorf("row %s has %d history rows, want 2", id, n)
		}
	}
}
