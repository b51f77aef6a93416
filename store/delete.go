package store

import (
	"fmt"

	"github.com/flowd/flowd/workflow"
)

// CheckDeletable applies Querier.DeleteInstance's rules, in its order of
// errors, to an instance that a backend has locked (or holds the write lock
// for): only a finished instance (workflow.Status.StopsSteps: nothing runs
// for it any more) at the expected version, when one is given, is deleted.
func CheckDeletable(id string, status workflow.Status, version int64, expected *int64) error {
	if !status.StopsSteps() {
		return fmt.Errorf("workflow %q is %s: %w; only a COMPLETED, FAILED, CANCELLED or TIMED_OUT workflow can be deleted", id, status, ErrNotTerminal)
	}
	if expected != nil && *expected != version {
		return &ConflictError{ID: id, Expected: *expected, Actual: version}
	}
	return nil
}

// TreeMember is a descendant (child, grandchild, …) of an instance being
// deleted, as a store read it under its transaction's locks.
type TreeMember struct {
	ID     string
	Parent string
	// Root is the instance being deleted whose descendant it is.
	Root   string
	Status workflow.Status
	// Locked is false for a member another transaction holds (a store
	// that skips locked rows): its tree is left for a later call.
	Locked bool
}

// DeletableTrees decides which of the instances roots (finished, locked,
// checked by CheckDeletable) go, each with its descendants members: a
// workflow goes with all its children, and only once every one of them
// has finished, so no child is left pointing at a parent that is gone
// and no running child is deleted. It returns the ids to delete (roots
// first, in their order, then their descendants, each once) and, for each
// root that must stay, the member that keeps it.
func DeletableTrees(roots []string, members []TreeMember) ([]string, map[string]TreeMember) {
	kept := map[string]TreeMember{}
	for _, m := range members {
		if _, seen := kept[m.Root]; !seen && (!m.Locked || !m.Status.StopsSteps()) {
			kept[m.Root] = m
		}
	}
	ids := make([]string, 0, len(roots)+len(members))
	seen := make(map[string]bool, cap(ids))
	add := func(id string) {
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	for _, r := range roots {
		if _, ok := kept[r]; !ok {
			add(r)
		}
	}
	for _, m := range members {
		if _, ok := kept[m.Root]; !ok {
			add(m.ID)
		}
	}
	return ids, kept
}

// LiveDescendant is the error of a delete of root refused for its
// descendant m, which it waited for and found live (DeletableTrees):
// errors.Is ErrNotTerminal.
func LiveDescendant(root string, m TreeMember) error {
	what := fmt.Sprintf("child workflow %q", m.ID)
	if m.Parent != root {
		what = fmt.Sprintf("descendant workflow %q (a child of %q)", m.ID, m.Parent)
	}
	return fmt.Errorf("workflow %q has a %s that is %s: %w; a workflow is deleted with its children, so cancel that one or wait until it finishes", root, what, m.Status, ErrNotTerminal)
}
