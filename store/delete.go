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
