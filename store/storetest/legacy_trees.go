package storetest

import (
	"errors"
	"slices"
	"testing"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// LegacyTreeNode is an instance as a database from before the counts of
// descendants holds it: its parent ("" for none) and its status. The
// stores' migration tests insert these rows before migrating and check
// them with CheckLegacyTrees afterwards.
type LegacyTreeNode struct {
	ID, Parent string
	Status     workflow.Status
}

// LegacyTrees are workflows in flight when the counts arrive: a tree of
// three levels (tree-root: 4 descendants, one finished), a cancelled parent
// whose child still runs (tree-cancelled: 1), and a child whose parent was
// deleted (orphan, itself top-level: 1).
func LegacyTrees() []LegacyTreeNode {
	return []LegacyTreeNode{
		{"tree-root", "", workflow.StatusRunning},
		{"tree-c1", "tree-root", workflow.StatusRunning},
		{"tree-c2", "tree-root", workflow.StatusCompleted},
		{"tree-g1", "tree-c1", workflow.StatusRunning},
		{"tree-g2", "tree-c1", workflow.StatusPaused},
		{"tree-cancelled", "", workflow.StatusCancelled},
		{"tree-stranded", "tree-cancelled", workflow.StatusRunning},
		{"orphan", "deleted-parent", workflow.StatusRunning},
		{"orphan-child", "orphan", workflow.StatusRunning},
		{"alone", "", workflow.StatusRunning},
	}
}

// CheckLegacyTrees checks a store migrated over LegacyTrees: each
// top-level workflow's count is exactly its descendants (a limit of that
// many refuses one more, a limit one higher takes it), and the child of
// the cancelled parent is due to be cancelled.
func CheckLegacyTrees(t *testing.T, s store.Backend) {
	t.Helper()
	eq, ok := s.(store.TaskQuerier)
	if !ok {
		t.Fatal("the store has no engine operations")
	}
	items, err := eq.Due(t.Context(), store.DueParams{Kind: store.DueAbandoned, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range items {
		got = append(got, it.Instance.ID)
	}
	if !slices.Equal(got, []string{"tree-stranded"}) {
		t.Errorf("Due(abandoned) after the migration = %v, want [tree-stranded]", got)
	}
	for root, n := range map[string]int{"tree-root": 4, "tree-cancelled": 1, "orphan": 1, "alone": 0} {
		p := store.CreateParams{ID: "new-" + root, Status: workflow.StatusRunning,
			Parent: &workflow.ParentRef{WorkflowID: root, Step: "s"}}
		if n > 0 {
			p.Descendant = &store.DescendantCount{Root: root, Max: n}
			_, err := s.Create(t.Context(), p)
			if !errors.Is(err, store.ErrDescendantLimit) {
				t.Errorf("%s: a descendant past its %d migrated ones: %v, want ErrDescendantLimit", root, n, err)
			}
		}
		p.Descendant = &store.DescendantCount{Root: root, Max: n + 1}
		if _, err := s.Create(t.Context(), p); err != nil {
			t.Errorf("%s: a descendant under a limit of %d: %v", root, n+1, err)
		}
		p.ID += "-2"
		_, err := s.Create(t.Context(), p)
		if !errors.Is(err, store.ErrDescendantLimit) {
			t.Errorf("%s: a second new descendant under a limit of %d: %v, want ErrDescendantLimit", root, n+1, err)
		}
	}
}
