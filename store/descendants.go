package store

import (
	"errors"
	"fmt"
	"math"

	"github.com/flowd/flowd/workflow"
)

// ErrDescendantLimit: a create counted as a descendant of a top-level
// workflow (CreateParams.Descendant) found that workflow at its limit of
// descendants: nothing was written. It is not a conflict: creating again
// changes nothing, since the count never goes down.
var ErrDescendantLimit = errors.New("descendant limit reached")

// DescendantCount counts a new instance as one more descendant (child,
// grandchild, …) of the top-level workflow Root, which may have at most
// Max.
type DescendantCount struct {
	Root string
	Max  int
}

// Check reports a count the store refuses (ErrInvalidArgument).
func (d *DescendantCount) Check() error {
	if d == nil {
		return nil
	}
	if err := workflow.ValidateInstanceID(d.Root); err != nil {
		return fmt.Errorf("descendant count: top-level workflow: %w", err)
	}
	if d.Max < 1 || d.Max > math.MaxInt32 {
		return fmt.Errorf("%w: descendant limit %d is outside 1–%d", ErrInvalidArgument, d.Max, math.MaxInt32)
	}
	return nil
}

// DescendantLimitError is the error of a create refused because its
// top-level workflow has as many descendants as it may: errors.Is
// ErrDescendantLimit.
type DescendantLimitError struct {
	Root string
	Max  int
}

func (e *DescendantLimitError) Error() string {
	return fmt.Sprintf("workflow %s already has %d descendants, its limit: %s", e.Root, e.Max, ErrDescendantLimit)
}

// Is makes errors.Is(err, ErrDescendantLimit) true.
func (e *DescendantLimitError) Is(target error) bool { return target == ErrDescendantLimit }
