package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// checkEngineFields fails t unless inst has definition revision rev and the
// deadline store.Timestamp(*deadline), or none when deadline is nil.
func checkEngineFields(t testing.TB, what string, inst *workflow.Instance, rev int, deadline *time.Time) {
	t.Helper()
	if inst == nil {
		t.Errorf("%s: no instance", what)
		return
	}
	if inst.DefinitionRevision != rev {
		t.Errorf("%s: definition revision = %d, want %d", what, inst.DefinitionRevision, rev)
	}
	switch {
	case deadline == nil && inst.Deadline != nil:
		t.Errorf("%s: deadline = %v, want none (nil)", what, *inst.Deadline)
	case deadline != nil && inst.Deadline == nil:
		t.Errorf("%s: deadline = nil, want %v", what, store.Timestamp(*deadline))
	case deadline != nil:
		checkTime(t, what+": deadline", *inst.Deadline, *deadline)
	}
}

func testInstanceEngineFields(t *testing.T, h Harness) {
	b := setup(t, h)
	b.engine(t)
	b.putRevisions(t, "order", 3)
	// Not UTC and not a whole microsecond: stored through store.Timestamp.
	deadline := clockStart.Add(10*time.Minute + 1)
	timed, err := b.s.Create(b.ctx, store.CreateParams{
		ID: "timed", Definition: "order", DefinitionRevision: 3, Status: workflow.StatusRunning, Deadline: &deadline,
	})
	if err != nil {
		t.Fatalf("Create with a revision and a deadline: %v", err)
	}
	checkEngineFields(t, "Create", timed, 3, &deadline)
	checkEngineFields(t, "Get", b.get(t, "timed"), 3, &deadline)
	assertInstance(t, "Get after Create", timed, b.get(t, "timed"))

	plain := b.create(t, store.CreateParams{ID: "plain", Definition: "order"})
	checkEngineFields(t, "Create without revision and deadline", plain, 0, nil)
	checkEngineFields(t, "Get without revision and deadline", b.get(t, "plain"), 0, nil)

	// A deadline already past is stored as given.
	past := clockStart.Add(-time.Hour)
	late := b.create(t, store.CreateParams{ID: "late", DefinitionRevision: 1, Deadline: &past})
	checkEngineFields(t, "Create with a past deadline", late, 1, &past)

	page, err := b.s.List(b.ctx, store.ListParams{})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	want := map[string]*workflow.Instance{"timed": timed, "plain": plain, "late": late}
	if len(page.Instances) != len(want) {
		t.Errorf("List returned %d instances, want %d", len(page.Instances), len(want))
	}
	for _, inst := range page.Instances {
		assertInstance(t, "listed "+inst.ID, want[inst.ID], inst)
	}
}

// testInstanceEngineFieldsKept: every operation that returns an instance
// returns its revision and deadline, and none of them changes them.
func testInstanceEngineFieldsKept(t *testing.T, h Harness) {
	b := setup(t, h)
	b.engine(t)
	deadline := clockStart.Add(time.Hour + 1)
	const rev = 2
	b.putRevisions(t, "order", rev)
	inst := b.create(t, store.CreateParams{
		ID: "kept", Definition: "order", DefinitionRevision: rev, Status: workflow.StatusRunning,
		State: stepState(), Deadline: &deadline,
	})
	check := func(what string) func(*workflow.Instance, error) *workflow.Instance {
		return func(got *workflow.Instance, err error) *workflow.Instance {
			t.Helper()
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			checkEngineFields(t, what, got, rev, &deadline)
			checkEngineFields(t, "Get after "+what, b.get(t, inst.ID), rev, &deadline)
			return got
		}
	}
	b.clock.Advance(time.Second)
	inst = check("ReplaceState")(Replace(b.ctx, b.s, inst.ID, inst.Version, stepState(), "replace"))
	b.clock.Advance(time.Second)
	inst = check("ModifyState")(Modify(b.ctx, b.s, inst.ID, func(cur *workflow.Instance) error { return cur.State.SetVar("v", 2) }, "modify"))
	b.clock.Advance(time.Second)
	inst = check("CompleteStep")(b.completeStep(inst.ID, "a", inst.Version, `{"ok":true}`))
	b.clock.Advance(time.Second)
	inst = check("UpdateState")(store.UpdateState(b.ctx, b.s, inst.ID, inst.Version, increment, "update"))
	b.clock.Advance(time.Second)
	inst = check("TransitionStatus")(Transition(b.ctx, b.s, store.TransitionParams{ID: inst.ID, From: workflow.StatusRunning, To: workflow.StatusPaused}))
	now := b.clock.Advance(time.Second)
	ids, err := Batch(b.ctx, b.s, store.BatchStatusParams{Status: workflow.StatusPaused, UpdatedBefore: now, NewStatus: workflow.StatusRunning, Limit: 10})
	if err != nil || !slices.Equal(ids, []string{inst.ID}) {
		t.Fatalf("BatchUpdateStatus = %v, %v; want [%s]", ids, err, inst.ID)
	}
	checkEngineFields(t, "Get after BatchUpdateStatus", b.get(t, inst.ID), rev, &deadline)
	page, err := b.s.List(b.ctx, store.ListParams{Definition: "order"})
	if err != nil || len(page.Instances) != 1 {
		t.Fatalf("List = %d instances, %v; want 1", len(page.Instances), err)
	}
	checkEngineFields(t, "List", page.Instances[0], rev, &deadline)
	if got := b.get(t, inst.ID); got.Version != 6 {
		t.Errorf("version after 6 changes = %d", got.Version)
	}
}

func testModifyStateDeadline(t *testing.T, h Harness) {
	b := setup(t, h)
	b.engine(t)
	d1 := clockStart.Add(time.Hour)
	inst := b.create(t, store.CreateParams{
		ID: "dl", DefinitionRevision: 4, Status: workflow.StatusRunning, State: counterState(0), Deadline: &d1,
	})
	// modify runs ModifyState with change and checks the result against prev
	// with the deadline want (nil: none) and the counter incremented.
	modify := func(what string, prev *workflow.Instance, change func(*workflow.Instance), want *time.Time) *workflow.Instance {
		t.Helper()
		now := b.clock.Advance(time.Second + 1)
		got, err := Modify(b.ctx, b.s, prev.ID, func(cur *workflow.Instance) error {
			change(cur)
			return increment(&cur.State)
		}, what)
		if err != nil {
			t.Fatalf("ModifyState (%s): %v", what, err)
		}
		exp := withVersion(prev, now, prev.Status, counterState(counter(prev.State)+1))
		exp.Deadline = nil
		if want != nil {
			exp.Deadline = ptr(store.Timestamp(*want))
		}
		assertInstance(t, "ModifyState ("+what+")", exp, got)
		assertInstance(t, "Get after ModifyState ("+what+")", exp, b.get(t, prev.ID))
		return got
	}

	// fn sees the current deadline; setting another one is written, a change
	// of the revision is ignored.
	d2 := clockStart.Add(2*time.Hour + 1)
	inst = modify("set another deadline", inst, func(cur *workflow.Instance) {
		if cur.Deadline == nil || !cur.Deadline.Equal(store.Timestamp(d1)) {
			t.Errorf("fn saw deadline %v, want %v", cur.Deadline, store.Timestamp(d1))
		}
		cur.Deadline = &d2
		cur.DefinitionRevision = 99
	}, &d2)
	inst = modify("keep the deadline", inst, func(*workflow.Instance) {}, &d2)
	inst = modify("clear the deadline", inst, func(cur *workflow.Instance) { cur.Deadline = nil }, nil)
	inst = modify("keep no deadline", inst, func(*workflow.Instance) {}, nil)
	d3 := clockStart.Add(-time.Minute)
	inst = modify("set a deadline again", inst, func(cur *workflow.Instance) { cur.Deadline = &d3 }, &d3)
	checkEngineFields(t, "after the changes", inst, 4, &d3)
	hist := b.history(t, inst.ID)
	if len(hist) != 6 || hist[5].Cause != "set a deadline again" {
		t.Errorf("history has %d rows, want 6 with the last one's cause \"set a deadline again\"", len(hist))
	}

	// A failing fn changes nothing, its deadline included.
	snap := b.snapshot(t, inst.ID)
	_, err := Modify(b.ctx, b.s, inst.ID, func(cur *workflow.Instance) error {
		cur.Deadline = nil
		return errBoom
	}, "boom")
	wantErrorIs(t, "ModifyState with a failing fn", err, errBoom)
	b.unchanged(t, "ModifyState with a failing fn", snap)
}
