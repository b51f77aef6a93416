package storetest

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

var actorTests = []conformanceTest{
	{"History_actorOfEveryWrite", testActorOfEveryWrite},
	{"History_actorOfGroupedWrites", testActorOfGroupedWrites},
}

// as is the bundle's context carrying actor.
func (b *bundle) as(actor string) context.Context { return store.WithActor(b.ctx, actor) }

// wantActors fails t unless the history of id has these actors, version
// 0 first.
func (b *bundle) wantActors(t testing.TB, id string, want ...string) {
	t.Helper()
	var got []string
	for _, e := range b.history(t, id) {
		got = append(got, e.Actor)
	}
	if !slices.Equal(got, want) {
		t.Errorf("actors of %s's versions: %q, want %q", id, got, want)
	}
}

// Every write that adds a version records the actor of its context, or
// the engine's when the context has none; a write that names its own
// actor records that one.
func testActorOfEveryWrite(t *testing.T, h Harness) {
	b := setup(t, h)
	fail := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	// Create, then each of the free-form writes.
	_, err := b.s.Create(b.ctx, store.CreateParams{ID: "nobody"})
	fail("Create without an actor", err)
	b.wantActors(t, "nobody", store.ActorEngine)
	_, err = b.s.Create(b.as("alice"), store.CreateParams{ID: "own", Actor: "importer"})
	fail("Create naming its actor", err)
	b.wantActors(t, "own", "importer")

	inst, err := b.s.Create(b.as("alice"), store.CreateParams{ID: "w", Status: workflow.StatusRunning, State: stepState()})
	fail("Create", err)
	next := inst.State.Clone()
	next.Variables["v"] = json.RawMessage(`2`)
	inst, err = Replace(b.as("bob"), b.s, "w", inst.Version, next, "patch")
	fail("ReplaceState", err)
	_, err = Modify(b.as("carol"), b.s, "w", func(i *workflow.Instance) error {
		i.State.Variables["v"] = json.RawMessage(`3`)
		return nil
	}, "patch *")
	fail("ModifyState", err)
	_, err = Transition(b.as("dave"), b.s, store.TransitionParams{ID: "w", From: workflow.StatusRunning, To: workflow.StatusPaused, ExpectedVersion: ptr(inst.Version + 1)})
	fail("TransitionStatus", err)
	_, err = Transition(b.as("erin"), b.s, store.TransitionParams{ID: "w", From: workflow.StatusPaused, To: workflow.StatusRunning})
	fail("TransitionStatus without a version", err)
	inst = b.get(t, "w")
	_, err = CompleteStep(b.as("frank"), b.s, StepParams{ID: "w", StepID: "w", ExpectedVersion: inst.Version, Output: json.RawMessage(`1`)})
	fail("CompleteStep", err)
	b.clock.Advance(time.Second)
	ids, err := Batch(b.as("grace"), b.s, store.BatchStatusParams{Status: workflow.StatusRunning, NewStatus: workflow.StatusPaused,
		UpdatedBefore: b.clock.Now(), Limit: 10})
	fail("BatchUpdateStatus", err)
	if !slices.Equal(ids, []string{"w"}) {
		t.Fatalf("BatchUpdateStatus moved %v, want [w]", ids)
	}
	b.wantActors(t, "w", "alice", "bob", "carol", "dave", "erin", "frank", "grace")

	// The engine's writes: Apply with a settled version (both rows) and
	// Apply naming its own actor.
	inst, leased, queued := b.applyFixture(t, "e")
	now := b.clock.Advance(time.Second)
	w, _, _, _ := applyCompletion(inst, leased, queued, now)
	w.Settled, w.SettledCause = workflow.StatusPaused, "settled"
	_, err = b.s.Apply(b.as("heidi"), w)
	fail("Apply", err)
	inst = b.get(t, "e")
	_, err = b.s.Apply(b.as("heidi"), &store.Write{ID: "e", ExpectedVersion: inst.Version, From: inst.Status, Status: workflow.StatusRunning,
		State: inst.State, Cause: "resumed", Now: now, Actor: "ivan"})
	fail("Apply naming its actor", err)
	// applyFixture's own writes are the engine's: a create and an Apply.
	b.wantActors(t, "e", store.ActorEngine, store.ActorEngine, "heidi", "heidi", "ivan")

}

// The writes of one ApplyGroup each record their own actor when they name
// one, else the context's; the group's claim writes no history row.
func testActorOfGroupedWrites(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	b.putDefinition(t, b.defs(t), "d", `{"v":1}`, 1, true)
	now := b.clock.Advance(time.Second)
	s1, _ := groupStart("s1", now)
	s1.Actor = "starter"
	s2, _ := groupStart("s2", now)
	var writes []*store.Write
	for _, id := range []string{"w1", "w2"} {
		_, tk := b.leasedFixture(t, eq, id)
		w, _ := completion(b.get(t, id), tk, now)
		writes = append(writes, w)
	}
	writes[0].Actor = "worker-1"
	b.runningWith(t, "c", withID("c-a", newTask("c", "a", "qg", clockStart)))
	claim := &store.GroupClaim{Params: claimOf("node", []string{"qg"}, now, 1)}
	if _, _, err := eq.ApplyGroup(b.as("group"), []store.CreateParams{s1, s2}, writes, claim); err != nil {
		t.Fatalf("ApplyGroup: %v", err)
	}
	b.wantActors(t, "s1", "starter")
	b.wantActors(t, "s2", "group")
	b.wantActors(t, "w1", store.ActorEngine, "worker-1")
	b.wantActors(t, "w2", store.ActorEngine, "group")
	// The group's claim leased c's task and wrote no history row.
	if len(claim.Claimed) != 1 {
		t.Errorf("the group's claim leased %d tasks, want c's", len(claim.Claimed))
	}
	b.wantActors(t, "c", store.ActorEngine)
}
