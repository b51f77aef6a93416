package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

var historyTests = []conformanceTest{
	{"History_ok", testHistoryOK},
	{"History_notFound", testHistoryNotFound},
	{"History_pages", testHistoryPages},
}

var migrateTests = []conformanceTest{
	{"Migrate_idempotent", testMigrateIdempotent},
	{"Migrate_concurrent", testMigrateConcurrent},
}

var miscTests = []conformanceTest{
	{"Context_cancelled", testContextCancelled},
	{"Capabilities_consistent", testCapabilities},
}

func testHistoryOK(t *testing.T, h Harness) {
	b := setup(t, h)
	var want []store.HistoryEntry
	record := func(inst *workflow.Instance, cause string) {
		t.Helper()
		want = append(want, store.HistoryEntry{Version: inst.Version, Status: inst.Status, State: inst.State, At: inst.UpdatedAt, Cause: cause})
	}
	step := func() time.Time { return b.clock.Advance(time.Minute + 1) }

	inst := b.create(t, store.CreateParams{State: stepState(), Cause: "made"})
	record(inst, "made")

	step()
	inst, err := Modify(b.ctx, b.s, inst.ID, func(cur *workflow.Instance) error { return cur.State.SetVar("v", 2) }, "modify")
	if err != nil {
		t.Fatalf("ModifyState: %v", err)
	}
	record(inst, "modify")

	step()
	inst = b.transition(t, inst.ID, workflow.StatusPending, workflow.StatusRunning)
	record(inst, "status PENDING→RUNNING")

	step()
	if inst, err = b.completeStep(inst.ID, "a", inst.Version, `{"done":true}`); err != nil {
		t.Fatalf("CompleteStep: %v", err)
	}
	record(inst, `complete step "a"`)

	step()
	if inst, err = Replace(b.ctx, b.s, inst.ID, inst.Version, replacement(), "replace"); err != nil {
		t.Fatalf("ReplaceState: %v", err)
	}
	record(inst, "replace")

	step()
	if inst, err = Transition(b.ctx, b.s, store.TransitionParams{ID: inst.ID, From: workflow.StatusRunning, To: workflow.StatusPaused, Cause: "operator"}); err != nil {
		t.Fatalf("TransitionStatus: %v", err)
	}
	record(inst, "operator")

	now := step()
	ids, err := Batch(b.ctx, b.s, store.BatchStatusParams{Status: workflow.StatusPaused, UpdatedBefore: now, NewStatus: workflow.StatusTimedOut, Limit: 1})
	if err != nil || !slices.Equal(ids, []string{inst.ID}) {
		t.Fatalf("BatchUpdateStatus = %v, %v; want [%s]", ids, err, inst.ID)
	}
	inst = b.get(t, inst.ID)
	record(inst, "batch PAUSED→TIMED_OUT")

	step()
	if inst, err = store.UpdateState(b.ctx, b.s, inst.ID, inst.Version, func(s *workflow.State) error { return s.SetVar("last", json.RawMessage(`true`)) }, "update"); err != nil {
		t.Fatalf("UpdateState: %v", err)
	}
	record(inst, "update")

	if inst.Version != 7 {
		t.Fatalf("version after 7 changes = %d", inst.Version)
	}
	// A failed operation adds nothing.
	if _, err := b.completeStep(inst.ID, "a", inst.Version, `1`); err == nil {
		t.Fatal("completing a completed step succeeded")
	}
	assertHistory(t, "History", want, b.history(t, inst.ID))

	// Another instance's history is its own.
	other := b.create(t, store.CreateParams{})
	if hist := b.history(t, other.ID); len(hist) != 1 || hist[0].Version != 0 {
		t.Errorf("history of a new instance = %+v, want version 0 only", hist)
	}
}

func testHistoryNotFound(t *testing.T, h Harness) {
	b := setup(t, h)
	b.create(t, store.CreateParams{ID: "exists"})
	for _, id := range []string{"missing", "", "exists%"} {
		hist, err := b.s.History(b.ctx, id, 0, 0)
		wantErrorIs(t, fmt.Sprintf("History(%q)", id), err, store.ErrNotFound)
		if len(hist) != 0 {
			t.Errorf("History(%q) returned %d rows with an error", id, len(hist))
		}
	}
}

// Pages of History are contiguous: since, since+1, … up to limit, and
// together every version once.
func testHistoryPages(t *testing.T, h Harness) {
	b := setup(t, h)
	inst := b.create(t, store.CreateParams{State: counterState(0)})
	for range 6 {
		var err error
		if inst, err = Modify(b.ctx, b.s, inst.ID, func(cur *workflow.Instance) error { return increment(&cur.State) }, "inc"); err != nil {
			t.Fatalf("ModifyState: %v", err)
		}
	}
	all := b.history(t, inst.ID)
	if len(all) != 7 {
		t.Fatalf("%d versions, want 7", len(all))
	}
	for _, limit := range []int{1, 2, 3, 7, 100} {
		var got []store.HistoryEntry
		for since := int64(0); ; {
			page, err := b.s.History(b.ctx, inst.ID, since, limit)
			if err != nil {
				t.Fatalf("History(since %d, limit %d): %v", since, limit, err)
			}
			if len(page) > limit {
				t.Fatalf("History(since %d, limit %d) returned %d versions", since, limit, len(page))
			}
			if len(page) > 0 && page[0].Version != since {
				t.Fatalf("History(since %d, limit %d) starts at version %d", since, limit, page[0].Version)
			}
			got = append(got, page...)
			if len(page) < limit {
				break
			}
			since = page[len(page)-1].Version + 1
		}
		assertHistory(t, fmt.Sprintf("pages of %d", limit), all, got)
	}
	if page, err := b.s.History(b.ctx, inst.ID, 4, 0); err != nil || len(page) != 3 || page[0].Version != 4 {
		t.Errorf("History(since 4, no limit) = %d versions from %v, %v; want 4, 5, 6", len(page), page, err)
	}
	for _, since := range []int64{7, 1000} {
		page, err := b.s.History(b.ctx, inst.ID, since, 10)
		if err != nil || page == nil || len(page) != 0 {
			t.Errorf("History(since %d) beyond the end = %v, %v; want an empty list", since, page, err)
		}
	}
	_, err := b.s.History(b.ctx, "missing", 7, 10)
	wantErrorIs(t, "History of a missing instance beyond version 0", err, store.ErrNotFound)
	for _, r := range [][2]int64{{-1, 10}, {0, -1}} {
		_, err := b.s.History(b.ctx, inst.ID, r[0], int(r[1]))
		wantErrorIs(t, fmt.Sprintf("History(since %d, limit %d)", r[0], r[1]), err, store.ErrInvalidArgument)
	}
}

func checkReport(t testing.TB, what string, r store.MigrationReport) {
	t.Helper()
	var last int64
	for _, m := range r.Applied {
		if m.Version <= last {
			t.Errorf("%s: applied versions not increasing: %+v", what, r.Applied)
		}
		if m.Name == "" || m.Duration < 0 {
			t.Errorf("%s: applied migration %+v lacks a name or has a negative duration", what, m)
		}
		last = m.Version
	}
	if len(r.Applied) > 0 && r.Version != last {
		t.Errorf("%s: resulting version %d, last applied %d", what, r.Version, last)
	}
}

func testMigrateIdempotent(t *testing.T, h Harness) {
	addr := h.NewDB(t)
	s := h.Open(t, addr, nil)
	first, err := s.Migrate(t.Context())
	if err != nil {
		t.Fatalf("first Migrate: %v", err)
	}
	checkReport(t, "first Migrate", first)
	if len(first.Applied) == 0 || first.Version <= 0 {
		t.Errorf("first Migrate on a fresh database = %+v, want migrations applied and a positive version", first)
	}
	for i := range 2 {
		again, err := s.Migrate(t.Context())
		if err != nil {
			t.Fatalf("Migrate again: %v", err)
		}
		if len(again.Applied) != 0 || again.Version != first.Version {
			t.Errorf("Migrate #%d = %+v, want nothing applied and version %d", i+2, again, first.Version)
		}
	}
	// Another store on the migrated database finds the schema current.
	again, err := h.Open(t, addr, nil).Migrate(t.Context())
	if err != nil {
		t.Fatalf("Migrate through a second store: %v", err)
	}
	if len(again.Applied) != 0 || again.Version != first.Version {
		t.Errorf("Migrate through a second store = %+v, want nothing applied and version %d", again, first.Version)
	}
}

func testMigrateConcurrent(t *testing.T, h Harness) {
	// How many migrations there are, from a database of its own.
	ref, err := h.Open(t, h.NewDB(t), nil).Migrate(t.Context())
	if err != nil {
		t.Fatalf("reference Migrate: %v", err)
	}
	addr := h.NewDB(t)
	stores := []store.Backend{h.Open(t, addr, nil), h.Open(t, addr, nil)}
	reports := make([]store.MigrationReport, len(stores))
	errs := make([]error, len(stores))
	runConcurrently(len(stores), func(i int) { reports[i], errs[i] = stores[i].Migrate(t.Context()) })
	applied := 0
	for i, err := range errs {
		if err != nil {
			t.Errorf("concurrent Migrate #%d: %v", i, err)
			continue
		}
		checkReport(t, fmt.Sprintf("concurrent Migrate #%d", i), reports[i])
		if reports[i].Version != ref.Version {
			t.Errorf("concurrent Migrate #%d reports version %d, want %d", i, reports[i].Version, ref.Version)
		}
		applied += len(reports[i].Applied)
	}
	if applied != len(ref.Applied) {
		t.Errorf("the concurrent runs applied %d migrations in all, want %d (each exactly once)", applied, len(ref.Applied))
	}
	// Both stores work on the result.
	for i, s := range stores {
		inst, err := s.Create(t.Context(), store.CreateParams{})
		if err != nil {
			t.Errorf("Create through store #%d: %v", i, err)
			continue
		}
		if _, err := stores[1-i].Get(t.Context(), inst.ID); err != nil {
			t.Errorf("Get through the other store: %v", err)
		}
	}
}

func testContextCancelled(t *testing.T, h Harness) {
	b := setup(t, h)
	inst := b.create(t, store.CreateParams{Status: workflow.StatusRunning, State: stepState()})
	snap := b.snapshot(t, inst.ID)
	ctx, cancel := context.WithCancel(b.ctx)
	cancel()
	v := inst.Version
	calls := map[string]func() error{
		"Get":    func() error { _, err := b.s.Get(ctx, inst.ID); return err },
		"Create": func() error { _, err := b.s.Create(ctx, store.CreateParams{ID: "new"}); return err },
		"List":   func() error { _, err := b.s.List(ctx, store.ListParams{}); return err },
		"ReplaceState": func() error {
			_, err := Replace(ctx, b.s, inst.ID, v, replacement(), "x")
			return err
		},
		"ModifyState": func() error {
			_, err := Modify(ctx, b.s, inst.ID, func(cur *workflow.Instance) error { return increment(&cur.State) }, "x")
			return err
		},
		"TransitionStatus": func() error {
			_, err := Transition(ctx, b.s, store.TransitionParams{ID: inst.ID, From: workflow.StatusRunning, To: workflow.StatusPaused})
			return err
		},
		"CompleteStep": func() error {
			_, err := CompleteStep(ctx, b.s, StepParams{ID: inst.ID, StepID: "a", ExpectedVersion: v})
			return err
		},
		"BatchUpdateStatus": func() error {
			_, err := Batch(ctx, b.s, store.BatchStatusParams{Status: workflow.StatusRunning, UpdatedBefore: clockStart.Add(time.Hour), NewStatus: workflow.StatusPaused, Limit: 10})
			return err
		},
		"History": func() error { _, err := b.s.History(ctx, inst.ID, 0, 0); return err },
		"UpdateWithRetry": func() error {
			_, err := store.UpdateWithRetry(ctx, b.s, inst.ID, store.DefaultRetryPolicy, increment, "x")
			return err
		},
	}
	for name, call := range calls {
		wantErrorIs(t, name+" with a cancelled context", call(), context.Canceled)
	}
	b.unchanged(t, "operations with a cancelled context", snap)
	for _, id := range []string{"new"} {
		_, err := b.s.Get(b.ctx, id)
		wantErrorIs(t, "Get("+id+")", err, store.ErrNotFound)
	}
	if err := b.s.Ping(ctx); err == nil {
		t.Error("Ping with a cancelled context succeeded")
	}
	if err := b.s.Ping(b.ctx); err != nil {
		t.Errorf("Ping: %v", err)
	}
}

func testCapabilities(t *testing.T, h Harness) {
	b := setup(t, h)
	c := b.s.Capabilities()
	if c.Name != h.Name {
		t.Errorf("Capabilities().Name = %q, want %q", c.Name, h.Name)
	}
}
