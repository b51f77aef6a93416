package postgres

import (
	"fmt"
	"math"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// parentColumns receives parent_id, parent_step and parent_index.
type parentColumns struct {
	id, step *string
	index    *int32
}

// ref is the parent link the columns hold (nil without a parent).
func (c parentColumns) ref() *workflow.ParentRef {
	if c.id == nil {
		return nil
	}
	p := &workflow.ParentRef{WorkflowID: *c.id}
	if c.step != nil {
		p.Step = *c.step
	}
	if c.index != nil {
		i := int(*c.index)
		p.Index = &i
	}
	return p
}

// parentArgs are a create's parent parameters: NULLs without a parent.
func parentArgs(p *workflow.ParentRef) []any {
	if p == nil {
		return []any{nil, nil, nil}
	}
	var index any
	if p.Index != nil {
		index = int32(*p.Index)
	}
	return []any{p.WorkflowID, p.Step, index}
}

// checkParent refuses a parent link PostgreSQL cannot store (a step with
// a NUL byte, an index beyond integer).
func checkParent(p *workflow.ParentRef) error {
	if p == nil {
		return nil
	}
	if err := checkText("parent step", p.Step); err != nil {
		return err
	}
	if p.Index != nil && *p.Index > math.MaxInt32 {
		return fmt.Errorf("%w: parent index %d is out of range", store.ErrInvalidArgument, *p.Index)
	}
	return nil
}
