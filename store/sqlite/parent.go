package sqlite

import (
	"database/sql"

	"github.com/flowd/flowd/workflow"
)

// parentColumns receives parent_id, parent_step and parent_index.
type parentColumns struct {
	id, step sql.NullString
	index    sql.NullInt64
}

// ref is the parent link the columns hold (nil without a parent).
func (c parentColumns) ref() *workflow.ParentRef {
	if !c.id.Valid {
		return nil
	}
	p := &workflow.ParentRef{WorkflowID: c.id.String, Step: c.step.String}
	if c.index.Valid {
		i := int(c.index.Int64)
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
		index = int64(*p.Index)
	}
	return []any{p.WorkflowID, p.Step, index}
}
