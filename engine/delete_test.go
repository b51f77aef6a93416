package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// A definition deleted through one node: a start on that node, and on
// another node that still remembers the revision as the latest, answers
// "unknown definition" (store.ErrNotFound) and creates nothing. A new PUT
// of the name continues the revisions, and both nodes start it.
func TestDeleteDefinitionAcrossNodes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		addr := b.newDB(t)
		a := newNode(t, b, addr, nodeOpts{workers: -1, noStart: true})
		other := newNode(t, b, addr, nodeOpts{workers: -1, noStart: true})
		ctx := context.Background()
		const yaml = "name: gone\nsteps:\n  - {id: a, type: task, handler: remote}\n"
		a.define(yaml)
		// other learns revision 1 as the latest by starting it once.
		first, err := other.eng.StartWorkflow(ctx, engine.StartParams{ID: "first", Definition: "gone"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := other.eng.Action(ctx, first.ID, "cancel"); err != nil {
			t.Fatal(err)
		}
		if err := a.eng.DeleteDefinition(ctx, "gone"); err != nil {
			t.Fatalf("DeleteDefinition: %v", err)
		}
		for name, n := range map[string]*node{"the deleting node": a, "another node": other} {
			_, err := n.eng.StartWorkflow(ctx, engine.StartParams{ID: "after", Definition: "gone"})
			if !errors.Is(err, store.ErrNotFound) {
				t.Errorf("start on %s after the delete: %v, want ErrNotFound", name, err)
			}
			if _, err := n.st.Get(ctx, "after"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("start on %s after the delete created the instance: %v", name, err)
			}
		}
		err = a.eng.DeleteDefinition(ctx, "gone")
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("deleting it again: %v, want ErrNotFound", err)
		}
		info, _, err := a.eng.PutDefinition(ctx, []byte(yaml))
		if err != nil || info.Revision != 2 {
			t.Fatalf("PUT after the delete: %+v, %v; want revision 2", info, err)
		}
		for name, n := range map[string]*node{"a": a, "other": other} {
			inst, err := n.eng.StartWorkflow(ctx, engine.StartParams{ID: "new-" + name, Definition: "gone"})
			if err != nil || inst.DefinitionRevision != 2 || inst.Status != workflow.StatusRunning {
				t.Errorf("start on %s after the new PUT: %+v, %v; want RUNNING at revision 2", name, inst, err)
			}
		}
		if _, err := a.st.Get(ctx, "first"); err != nil {
			t.Errorf("a finished instance of the deleted revision: %v", err)
		}
	})
}

// A definition with a live instance is not deleted, and the engine keeps
// starting it.
func TestDeleteDefinitionInUse(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{workers: -1, noStart: true})
		ctx := context.Background()
		n.define("name: busy\nsteps:\n  - {id: a, type: task, handler: remote}\n")
		if _, err := n.eng.StartWorkflow(ctx, engine.StartParams{ID: "w", Definition: "busy"}); err != nil {
			t.Fatal(err)
		}
		if err := n.eng.DeleteDefinition(ctx, "busy"); !errors.Is(err, store.ErrDefinitionInUse) {
			t.Fatalf("DeleteDefinition with a RUNNING instance: %v, want ErrDefinitionInUse", err)
		}
		if _, err := n.eng.StartWorkflow(ctx, engine.StartParams{ID: "w2", Definition: "busy"}); err != nil {
			t.Errorf("start after a refused delete: %v", err)
		}
	})
}

// A finished instance whose definition was deleted cannot run again: its
// retry is refused as such, and the instance stays as it was.
func TestRetryAfterDefinitionDeleted(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{workers: -1, noStart: true})
		ctx := context.Background()
		n.define("name: gone\nsteps:\n  - {id: a, type: task, handler: remote}\n")
		if _, err := n.eng.StartWorkflow(ctx, engine.StartParams{ID: "w", Definition: "gone"}); err != nil {
			t.Fatal(err)
		}
		failed, err := n.eng.Transition(ctx, "w", workflow.StatusRunning, workflow.StatusFailed)
		if err != nil {
			t.Fatal(err)
		}
		if err := n.eng.DeleteDefinition(ctx, "gone"); err != nil {
			t.Fatalf("DeleteDefinition with only a FAILED instance: %v", err)
		}
		if _, err := n.eng.Action(ctx, "w", "retry"); !errors.Is(err, engine.ErrDefinitionDeleted) {
			t.Fatalf("retry after the definition was deleted: %v, want ErrDefinitionDeleted", err)
		}
		got, err := n.st.Get(ctx, "w")
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != workflow.StatusFailed || got.Version != failed.Version {
			t.Errorf("after the refused retry: %s at version %d, want FAILED at %d", got.Status, got.Version, failed.Version)
		}
	})
}

// Deleting a finished parent deletes its child workflows with it: no child
// is left with a parent that is gone.
func TestDeleteParentDeletesChildren(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{handlers: map[string]engine.Handler{"echo": echo}})
		n.define(lineDef)
		n.define(orderDef)
		n.start("order", "o1", `{"sku": "x-1"}`)
		done := n.waitStatus("o1", workflow.StatusCompleted, 10*time.Second)
		kids := n.children("o1")
		if len(kids) != 1 {
			t.Fatalf("children of o1: %d, want 1", len(kids))
		}
		ctx := context.Background()
		if err := n.st.DeleteInstance(ctx, "o1", &done.Version); err != nil {
			t.Fatalf("DeleteInstance(o1): %v", err)
		}
		for _, id := range []string{"o1", kids[0].ID} {
			if _, err := n.st.Get(ctx, id); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("Get(%s) after deleting o1: %v, want ErrNotFound", id, err)
			}
		}
	})
}
