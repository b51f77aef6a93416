package storetest

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"testing"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// Limits of runaway workflows in the store: the count of a top-level
// workflow's descendants (CreateParams.Descendant) and the sweep's read of
// the child workflows whose parent stopped (Due(abandoned)).

var descendantTests = []conformanceTest{
	{"Descendants_limit", testDescendantsLimit},
	{"Descendants_groupRollsBack", testDescendantsGroupRollsBack},
	{"Descendants_invalid", testDescendantsInvalid},
	{"Descendants_deleteRoot", testDescendantsDeleteRoot},
	{"Descendants_concurrent", testDescendantsConcurrent},
	{"Due_abandoned", testDueAbandoned},
}

// descendant is the create of child id of parent, counted under root.
func descendant(id, parent, root string, max int) store.CreateParams {
	return store.CreateParams{ID: id, Status: workflow.StatusRunning, Parent: &workflow.ParentRef{WorkflowID: parent, Step: "s"},
		Descendant: &store.DescendantCount{Root: root, Max: max}}
}

// wantDescendantLimit fails t unless err is the limit of root at max.
func wantDescendantLimit(t testing.TB, what string, err error, root string, max int) {
	t.Helper()
	var le *store.DescendantLimitError
	if !errors.As(err, &le) || !errors.Is(err, store.ErrDescendantLimit) || le.Root != root || le.Max != max {
		t.Errorf("%s: error = %v (%T), want a *DescendantLimitError of %s at %d", what, err, err, root, max)
	}
	if errors.Is(err, store.ErrConflict) {
		t.Errorf("%s: the limit is not a conflict (creating again changes nothing): %v", what, err)
	}
}

// testDescendantsLimit: children and grandchildren count under their
// top-level workflow, up to its limit; past it nothing is written. The
// count never goes down, another top-level workflow has its own, and a
// higher limit lets more in.
func testDescendantsLimit(t *testing.T, h Harness) {
	b := setup(t, h)
	b.create(t, store.CreateParams{ID: "root", Status: workflow.StatusRunning})
	b.create(t, store.CreateParams{ID: "other", Status: workflow.StatusRunning})
	b.create(t, descendant("c1", "root", "root", 3))
	b.create(t, descendant("g1", "c1", "root", 3))
	b.transition(t, "g1", workflow.StatusRunning, workflow.StatusCompleted) // still counts
	b.create(t, descendant("c2", "root", "root", 3))
	_, err := b.s.Create(b.ctx, descendant("c3", "root", "root", 3))
	wantDescendantLimit(t, "a fourth descendant under a limit of 3", err, "root", 3)
	b.wantAbsent(t, "the refused descendant", "c3")
	b.create(t, descendant("o1", "other", "other", 1))
	_, err = b.s.Create(b.ctx, descendant("o2", "other", "other", 1))
	wantDescendantLimit(t, "a second descendant of other under a limit of 1", err, "other", 1)
	b.create(t, descendant("c3", "root", "root", 4))
	_, err = b.s.Create(b.ctx, descendant("c4", "root", "root", 4))
	wantDescendantLimit(t, "a fifth descendant under a limit of 4", err, "root", 4)
	page, err := b.s.List(b.ctx, store.ListParams{Parent: "root"})
	if err != nil || len(page.Instances) != 3 {
		t.Errorf("children of root: %d, %v; want 3", len(page.Instances), err)
	}
}

// testDescendantsGroupRollsBack: in ApplyGroup, a create refused by the
// limit rolls back everything of the group (the parent's write with it);
// a top-level workflow that is not stored is ErrNotFound, and nothing is
// written either.
func testDescendantsGroupRollsBack(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	b.create(t, store.CreateParams{ID: "root", Status: workflow.StatusRunning, State: stepState()})
	parentWrite := func(v int64) *store.Write {
		return &store.Write{ID: "root", ExpectedVersion: v, From: workflow.StatusRunning, Status: workflow.StatusRunning,
			State: stepState(), Cause: "started a child", Now: b.clock.Now()}
	}
	if _, _, err := eq.ApplyGroup(b.ctx, []store.CreateParams{descendant("c1", "root", "root", 1)}, []*store.Write{parentWrite(0)}, nil); err != nil {
		t.Fatalf("the first child with its parent's write: %v", err)
	}
	snap := b.snapshot(t, "root")
	_, _, err := eq.ApplyGroup(b.ctx, []store.CreateParams{descendant("c2", "root", "root", 1)}, []*store.Write{parentWrite(1)}, nil)
	wantDescendantLimit(t, "a second child in a group", err, "root", 1)
	b.unchanged(t, "the parent of a refused child", snap)
	b.wantAbsent(t, "the refused child", "c2")
	_, err = b.s.Create(b.ctx, descendant("c3", "root", "gone", 5))
	wantErrorIs(t, "a descendant of a top-level workflow not stored", err, store.ErrNotFound)
	b.wantAbsent(t, "the descendant of a missing workflow", "c3")
}

// testDescendantsInvalid: a count without a valid top-level workflow or
// limit, or with an idempotency key, is refused before anything is
// written.
func testDescendantsInvalid(t *testing.T, h Harness) {
	b := setup(t, h)
	b.create(t, store.CreateParams{ID: "root"})
	for _, c := range []struct {
		what string
		p    store.CreateParams
	}{
		{"limit 0", descendant("x", "root", "root", 0)},
		{"limit beyond 32 bits", descendant("x", "root", "root", 1<<31)},
		{"a malformed top-level id", descendant("x", "root", "a b", 1)},
		{"an idempotency key", func() store.CreateParams {
			p := descendant("x", "root", "root", 1)
			p.IdempotencyKey, p.RequestHash = "k", "h"
			return p
		}()},
	} {
		_, err := b.s.Create(b.ctx, c.p)
		if c.what == "a malformed top-level id" {
			wantErrorIs(t, c.what, err, workflow.ErrInvalidID)
		} else {
			wantErrorIs(t, c.what, err, store.ErrInvalidArgument)
		}
		b.wantAbsent(t, c.what, "x")
	}
}

// testDescendantsDeleteRoot: a finished top-level workflow with a count is
// deleted like any other, with its finished descendants (its count goes
// with it).
func testDescendantsDeleteRoot(t *testing.T, h Harness) {
	b := setup(t, h)
	b.create(t, store.CreateParams{ID: "root", Status: workflow.StatusRunning})
	b.create(t, descendant("c1", "root", "root", 5))
	b.transition(t, "c1", workflow.StatusRunning, workflow.StatusCompleted)
	done := b.transition(t, "root", workflow.StatusRunning, workflow.StatusCompleted)
	if err := b.s.DeleteInstance(b.ctx, "root", &done.Version); err != nil {
		t.Fatalf("deleting a top-level workflow with descendants: %v", err)
	}
	for _, id := range []string{"root", "c1"} {
		_, err := b.s.Get(b.ctx, id)
		wantErrorIs(t, "the deleted top-level workflow's tree: "+id, err, store.ErrNotFound)
	}
}

// testDescendantsConcurrent: writers creating descendants of one top-level
// workflow at once, each on its own connection, never pass the limit:
// exactly max of them are created, every other is refused by the limit.
func testDescendantsConcurrent(t *testing.T, h Harness) {
	b := setup(t, h)
	b.create(t, store.CreateParams{ID: "root", Status: workflow.StatusRunning})
	const writers, max = 24, 10
	var wg sync.WaitGroup
	errs := make([]error, writers)
	start := make(chan struct{})
	for i := range writers {
		wg.Go(func() {
			<-start
			_, errs[i] = b.s.Create(b.ctx, descendant(fmt.Sprintf("c%02d", i), "root", "root", max))
		})
	}
	close(start)
	wg.Wait()
	created := 0
	for i, err := range errs {
		switch {
		case err == nil:
			created++
		case errors.Is(err, store.ErrDescendantLimit):
			b.wantAbsent(t, "a refused descendant", fmt.Sprintf("c%02d", i))
		default:
			t.Errorf("writer %d: %v", i, err)
		}
	}
	page, err := b.s.List(b.ctx, store.ListParams{Parent: "root", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if created != max || len(page.Instances) != max {
		t.Errorf("%d writers under a limit of %d: %d created, %d stored", writers, max, created, len(page.Instances))
	}
}

// testDueAbandoned: Due(abandoned) reads the child workflows that still
// run (PENDING, QUEUED, RUNNING, PAUSED) whose parent no longer does, each
// as stored and without a task, and no other instance.
func testDueAbandoned(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	parents := map[string]workflow.Status{"p-run": "", "p-paused": workflow.StatusPaused, "p-cancel": workflow.StatusCancelled,
		"p-fail": workflow.StatusFailed, "p-done": workflow.StatusCompleted, "p-timeout": workflow.StatusTimedOut}
	var want []string
	for _, p := range slices.Sorted(maps.Keys(parents)) {
		b.create(t, store.CreateParams{ID: p, Status: workflow.StatusRunning})
		for _, kid := range []struct {
			suffix string
			status workflow.Status
		}{{"pending", workflow.StatusPending}, {"running", workflow.StatusRunning}, {"paused", workflow.StatusPaused},
			{"done", workflow.StatusCompleted}, {"cancelled", workflow.StatusCancelled}, {"failed", workflow.StatusFailed}} {
			id := p + "-" + kid.suffix
			created := workflow.StatusRunning
			if kid.status == workflow.StatusPending {
				created = workflow.StatusPending
			}
			b.create(t, store.CreateParams{ID: id, Status: created, Parent: &workflow.ParentRef{WorkflowID: p, Step: "s"}})
			if kid.status != created {
				b.transition(t, id, workflow.StatusRunning, kid.status)
			}
			if parents[p] != "" && parents[p] != workflow.StatusPaused && !kid.status.Terminal() && kid.status != workflow.StatusFailed {
				want = append(want, id)
			}
		}
		if to := parents[p]; to != "" {
			b.transition(t, p, workflow.StatusRunning, to)
		}
	}
	// A child whose parent is not stored has nobody to stop it here.
	b.create(t, store.CreateParams{ID: "lost", Status: workflow.StatusRunning, Parent: &workflow.ParentRef{WorkflowID: "gone", Step: "s"}})
	items := b.due(t, eq, store.DueAbandoned, clockStart, 100)
	var got []string
	for _, it := range items {
		if it.Task != nil || it.Instance == nil {
			t.Fatalf("due item %+v", it)
		}
		assertInstance(t, "abandoned "+it.Instance.ID, b.get(t, it.Instance.ID), it.Instance)
		got = append(got, it.Instance.ID)
	}
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("Due(abandoned) = %v, want %v", got, want)
	}
	if n := len(b.due(t, eq, store.DueAbandoned, clockStart, 5)); n != 5 {
		t.Errorf("Due(abandoned, limit 5) = %d items, want 5", n)
	}
}
