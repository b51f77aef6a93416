package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

var deleteTests = []conformanceTest{
	{"DeleteInstance", testDeleteInstance},
	{"DeleteInstance_errors", testDeleteInstanceErrors},
	{"DeleteInstance_retryRace", testDeleteInstanceRetryRace},
	{"DeleteDefinition", testDeleteDefinition},
	{"DeleteDefinition_liveInstances", testDeleteDefinitionLive},
	{"DeleteDefinition_createAfter", testDeleteDefinitionCreateAfter},
	{"DeleteDefinition_startRace", testDeleteDefinitionStartRace},
}

// finished creates a RUNNING instance with id, its tasks, a few history
// rows and an idempotency key, and moves it to status.
func (b *bundle) finished(t testing.TB, id string, status workflow.Status) *workflow.Instance {
	t.Helper()
	eq := b.engine(t)
	now := b.clock.Now()
	b.create(t, store.CreateParams{ID: id, Status: workflow.StatusRunning, State: stepState(),
		IdempotencyKey: "key-" + id, RequestHash: "h",
		Tasks: []*store.Task{newTask("", "a", "q1", now), newTask("", "b", "q1", now)}})
	if _, err := Modify(b.ctx, b.s, id, func(i *workflow.Instance) error {
		i.State.Variables = map[string]json.RawMessage{"n": json.RawMessage("1")}
		return nil
	}, "bump"); err != nil {
		t.Fatalf("ModifyState(%q): %v", id, err)
	}
	if n := len(b.tasksOf(t, eq, id)); n != 2 {
		t.Fatalf("%s has %d tasks, want 2", id, n)
	}
	return b.transition(t, id, workflow.StatusRunning, status)
}

// wantDeleted fails t unless id, its history and its tasks are gone.
func (b *bundle) wantDeleted(t testing.TB, what, id string) {
	t.Helper()
	_, err := b.s.Get(b.ctx, id)
	wantErrorIs(t, what+": Get", err, store.ErrNotFound)
	_, err = b.s.History(b.ctx, id, 0, 0)
	wantErrorIs(t, what+": History", err, store.ErrNotFound)
	if tasks := b.tasksOf(t, b.engine(t), id); len(tasks) != 0 {
		t.Errorf("%s: %d tasks left: %v", what, len(tasks), taskIDs(tasks))
	}
}

// A finished instance goes with its history, its tasks and its idempotency
// key (the key is free again); other instances stay as they were.
func testDeleteInstance(t *testing.T, h Harness) {
	b := setup(t, h)
	for _, status := range workflow.StopStatuses {
		id := "del-" + string(status)
		inst := b.finished(t, id, status)
		if err := b.s.DeleteInstance(b.ctx, id, &inst.Version); err != nil {
			t.Fatalf("DeleteInstance(%s at version %d): %v", status, inst.Version, err)
		}
		b.wantDeleted(t, "after deleting a "+string(status)+" instance", id)
		again := b.create(t, store.CreateParams{ID: "again-" + id, IdempotencyKey: "key-" + id, RequestHash: "other"})
		if again.ID != "again-"+id {
			t.Errorf("the deleted instance's key made %s", again.ID)
		}
	}
	kept := b.finished(t, "kept", workflow.StatusCompleted)
	snap := b.snapshot(t, "kept")
	gone := b.finished(t, "gone", workflow.StatusCompleted)
	// No expected version (If-Match: *): any version.
	if err := b.s.DeleteInstance(b.ctx, "gone", nil); err != nil {
		t.Fatalf("DeleteInstance(gone, any version): %v", err)
	}
	b.wantDeleted(t, "after deleting at any version", gone.ID)
	b.unchanged(t, "another instance", snap)
	if n := len(b.tasksOf(t, b.engine(t), kept.ID)); n != 2 {
		t.Errorf("another instance has %d tasks, want 2", n)
	}
	err := b.s.DeleteInstance(b.ctx, "gone", nil)
	wantErrorIs(t, "deleting it again", err, store.ErrNotFound)
}

// The errors come in the documented order (not found, live, stale version)
// and none of them deletes anything.
func testDeleteInstanceErrors(t *testing.T, h Harness) {
	b := setup(t, h)
	err := b.s.DeleteInstance(b.ctx, "nope", nil)
	wantErrorIs(t, "unknown id", err, store.ErrNotFound)
	err = b.s.DeleteInstance(b.ctx, "nope", ptr(int64(3)))
	wantErrorIs(t, "unknown id with a version", err, store.ErrNotFound)

	b.create(t, store.CreateParams{ID: "pending", State: stepState()})
	b.create(t, store.CreateParams{ID: "running", Status: workflow.StatusRunning, State: stepState()})
	b.create(t, store.CreateParams{ID: "paused", Status: workflow.StatusRunning, State: stepState()})
	b.transition(t, "paused", workflow.StatusRunning, workflow.StatusPaused)
	for _, id := range []string{"pending", "running", "paused"} {
		snap := b.snapshot(t, id)
		inst := b.get(t, id)
		for _, v := range []*int64{nil, &inst.Version, ptr(inst.Version + 7)} {
			err := b.s.DeleteInstance(b.ctx, id, v)
			wantErrorIs(t, "deleting a "+string(inst.Status)+" instance", err, store.ErrNotTerminal)
			if errors.Is(err, store.ErrConflict) {
				t.Errorf("deleting a %s instance: %v is a conflict; a live instance is refused before its version is compared", inst.Status, err)
			}
		}
		b.unchanged(t, "a live instance after delete attempts", snap)
	}

	inst := b.finished(t, "failed", workflow.StatusFailed)
	snap := b.snapshot(t, "failed")
	err = b.s.DeleteInstance(b.ctx, "failed", ptr(inst.Version-1))
	wantConflict(t, "stale version", err, "failed", inst.Version-1, inst.Version)
	b.unchanged(t, "after a stale delete", snap)
	if n := len(b.tasksOf(t, b.engine(t), "failed")); n != 2 {
		t.Errorf("after a stale delete: %d tasks, want 2", n)
	}
}

// A delete racing a retry (FAILED → RUNNING) of the same instance: exactly
// one of them wins, and a live instance is never deleted.
func testDeleteInstanceRetryRace(t *testing.T, h Harness) {
	b := setup(t, h)
	const rounds = 20
	for i := range rounds {
		id := fmt.Sprintf("race-%d", i)
		inst := b.finished(t, id, workflow.StatusFailed)
		var (
			wg                  sync.WaitGroup
			deleteErr, retryErr error
		)
		wg.Add(2)
		go func() {
			defer wg.Done()
			deleteErr = b.s.DeleteInstance(b.ctx, id, &inst.Version)
		}()
		go func() {
			defer wg.Done()
			_, retryErr = Transition(b.ctx, b.s, store.TransitionParams{ID: id, From: workflow.StatusFailed, To: workflow.StatusRunning})
		}()
		wg.Wait()
		switch {
		case deleteErr == nil:
			wantErrorIs(t, id+": retry after the delete", retryErr, store.ErrNotFound)
			b.wantDeleted(t, id, id)
		case retryErr == nil:
			// Refused as live (the retry came first) or, had the
			// delete read the row before, as a stale version.
			if !errors.Is(deleteErr, store.ErrNotTerminal) && !errors.Is(deleteErr, store.ErrConflict) {
				t.Errorf("%s: delete after the retry: %v, want ErrNotTerminal or a conflict", id, deleteErr)
			}
			if got := b.get(t, id); got.Status != workflow.StatusRunning {
				t.Errorf("%s: status %s after the retry won, want RUNNING", id, got.Status)
			}
			if n := len(b.history(t, id)); n == 0 {
				t.Errorf("%s: the retried instance has no history", id)
			}
		default:
			t.Errorf("%s: both failed: delete %v, retry %v", id, deleteErr, retryErr)
		}
	}
}

// putRevisions stores revisions 1..n of name.
func (b *bundle) putRevisions(t testing.TB, name string, n int) {
	t.Helper()
	d := b.defs(t)
	for rev := 1; rev <= n; rev++ {
		b.putDefinition(t, d, name, fmt.Sprintf(`{"rev":%d}`, rev), rev, true)
	}
}

// Deleting a definition deletes every revision; finished instances of it
// stay; a new PUT of the name continues the revision numbers.
func testDeleteDefinition(t *testing.T, h Harness) {
	b := setup(t, h)
	d := b.defs(t)
	b.putRevisions(t, "d", 2)
	b.putRevisions(t, "other", 1)
	b.create(t, store.CreateParams{ID: "done", Definition: "d", DefinitionRevision: 2, Status: workflow.StatusRunning, State: stepState()})
	b.transition(t, "done", workflow.StatusRunning, workflow.StatusCompleted)
	snap := b.snapshot(t, "done")
	if err := d.DeleteDefinition(b.ctx, "d"); err != nil {
		t.Fatalf("DeleteDefinition: %v", err)
	}
	for _, rev := range []int{0, 1, 2} {
		_, err := store.GetDefinition(b.ctx, d, "d", rev)
		wantErrorIs(t, fmt.Sprintf("GetDefinition(d, %d) after the delete", rev), err, store.ErrNotFound)
	}
	defs, err := d.ListDefinitions(b.ctx, store.ListDefinitionsParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(defs) != 1 || defs[0].Name != "other" {
		t.Errorf("ListDefinitions after the delete: %v, want only other", defs)
	}
	b.unchanged(t, "a finished instance of the deleted definition", snap)
	err = d.DeleteDefinition(b.ctx, "d")
	wantErrorIs(t, "deleting it again", err, store.ErrNotFound)
	err = d.DeleteDefinition(b.ctx, "never")
	wantErrorIs(t, "an unknown definition", err, store.ErrNotFound)

	// Revisions 1 and 2 are never handed out again, even for the same spec.
	b.putDefinition(t, d, "d", `{"rev":2}`, 3, true)
	b.putDefinition(t, d, "d", `{"rev":4}`, 4, true)
	if err := d.DeleteDefinition(b.ctx, "d"); err != nil {
		t.Fatalf("DeleteDefinition the second time: %v", err)
	}
	b.putDefinition(t, d, "d", `{"rev":1}`, 5, true)
	if _, err := store.GetDefinition(b.ctx, d, "other", 1); err != nil {
		t.Errorf("another definition after the deletes: %v", err)
	}
}

// A definition with a live instance (PENDING, RUNNING, PAUSED) of any
// revision is not deleted.
func testDeleteDefinitionLive(t *testing.T, h Harness) {
	b := setup(t, h)
	d := b.defs(t)
	b.putRevisions(t, "d", 2)
	b.create(t, store.CreateParams{ID: "w", Definition: "d", DefinitionRevision: 1, Status: workflow.StatusRunning, State: stepState()})
	for _, step := range []struct {
		from, to workflow.Status
		live     bool
	}{
		{"", workflow.StatusRunning, true},
		{workflow.StatusRunning, workflow.StatusPaused, true},
		{workflow.StatusPaused, workflow.StatusTimedOut, false},
	} {
		if step.from != "" {
			b.transition(t, "w", step.from, step.to)
		}
		if !step.live {
			break
		}
		err := d.DeleteDefinition(b.ctx, "d")
		wantErrorIs(t, "DeleteDefinition with a "+string(step.to)+" instance", err, store.ErrDefinitionInUse)
		if _, err := store.GetDefinition(b.ctx, d, "d", 1); err != nil {
			t.Errorf("revision 1 after a refused delete (%s): %v", step.to, err)
		}
		if _, err := store.GetDefinition(b.ctx, d, "d", 2); err != nil {
			t.Errorf("revision 2 after a refused delete (%s): %v", step.to, err)
		}
	}
	// A PENDING instance (created so by the store) counts as live too.
	b.create(t, store.CreateParams{ID: "p", Definition: "d", DefinitionRevision: 2, State: stepState()})
	err := d.DeleteDefinition(b.ctx, "d")
	wantErrorIs(t, "DeleteDefinition with a PENDING instance", err, store.ErrDefinitionInUse)
	b.transition(t, "p", workflow.StatusPending, workflow.StatusCancelled)
	if err := d.DeleteDefinition(b.ctx, "d"); err != nil {
		t.Errorf("DeleteDefinition with TIMED_OUT and CANCELLED instances: %v", err)
	}
	// A refused delete left no tombstone behind a live name: the next
	// revision after a successful one continues from the highest.
	b.putDefinition(t, d, "d", `{"rev":1}`, 3, true)
}

// After a delete, a create naming a revision of the definition writes
// nothing: ErrStaleRevision under LatestRevision (the engine then reads the
// latest revision and finds none), ErrNotFound otherwise; with tasks and a
// key too.
func testDeleteDefinitionCreateAfter(t *testing.T, h Harness) {
	b := setup(t, h)
	d := b.defs(t)
	b.putRevisions(t, "d", 1)
	if err := d.DeleteDefinition(b.ctx, "d"); err != nil {
		t.Fatal(err)
	}
	now := b.clock.Now()
	for _, latest := range []bool{true, false} {
		for _, withTasks := range []bool{false, true} {
			for _, key := range []string{"", "k"} {
				what := fmt.Sprintf("Create of a deleted definition (latest %v, tasks %v, key %q)", latest, withTasks, key)
				p := store.CreateParams{Definition: "d", DefinitionRevision: 1, LatestRevision: latest,
					Status: workflow.StatusRunning, State: stepState(), IdempotencyKey: key}
				if key != "" {
					p.RequestHash = "h"
				}
				if withTasks {
					p.Tasks, p.Notify = []*store.Task{newTask("", "a", "q1", now)}, true
				}
				_, err := b.s.Create(b.ctx, p)
				if latest {
					wantErrorIs(t, what, err, store.ErrStaleRevision)
				} else {
					wantErrorIs(t, what, err, store.ErrNotFound)
				}
				if n := b.countAll(t); n != 0 {
					t.Fatalf("%s: %d instances stored", what, n)
				}
			}
		}
	}
	// A free-form instance that only carries the name is not an instance
	// of a revision: it is created.
	b.create(t, store.CreateParams{ID: "free", Definition: "d"})
}

// Starts and a delete of one definition at once: either the delete wins and
// no start created anything, or a start won and the delete was refused.
func testDeleteDefinitionStartRace(t *testing.T, h Harness) {
	b := setup(t, h)
	d := b.defs(t)
	const rounds, starts = 10, 4
	for round := range rounds {
		name := fmt.Sprintf("d%d", round)
		b.putRevisions(t, name, 1)
		var (
			wg        sync.WaitGroup
			deleteErr error
			created   = make([]bool, starts)
		)
		wg.Add(starts + 1)
		go func() {
			defer wg.Done()
			deleteErr = d.DeleteDefinition(b.ctx, name)
		}()
		for i := range starts {
			go func() {
				defer wg.Done()
				_, err := b.s.Create(b.ctx, store.CreateParams{ID: fmt.Sprintf("%s-%d", name, i), Definition: name, DefinitionRevision: 1,
					LatestRevision: i%2 == 0, Status: workflow.StatusRunning, State: stepState()})
				switch {
				case err == nil:
					created[i] = true
				case errors.Is(err, store.ErrStaleRevision), errors.Is(err, store.ErrNotFound):
				default:
					t.Errorf("%s: start %d: %v", name, i, err)
				}
			}()
		}
		wg.Wait()
		anyCreated := false
		for i, ok := range created {
			_, err := b.s.Get(b.ctx, fmt.Sprintf("%s-%d", name, i))
			if ok != (err == nil) {
				t.Errorf("%s: start %d reported created %v, Get: %v", name, i, ok, err)
			}
			anyCreated = anyCreated || ok
		}
		switch {
		case deleteErr == nil && anyCreated:
			t.Errorf("%s: the delete and a start both succeeded: a live instance of a deleted definition", name)
		case deleteErr != nil && !errors.Is(deleteErr, store.ErrDefinitionInUse):
			t.Errorf("%s: delete: %v", name, deleteErr)
		case deleteErr != nil && !anyCreated:
			t.Errorf("%s: the delete was refused (%v) but no start created anything", name, deleteErr)
		}
	}
}
