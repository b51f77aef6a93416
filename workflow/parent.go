package workflow

import (
	"encoding/json"
	"fmt"
)

// ParentRef names the step of another instance that started this one as a
// child workflow: the parent's id, the step and, for a foreach step, the
// item's index. A child's outcome is reported to that step only.
type ParentRef struct {
	WorkflowID string `json:"workflow_id"`
	Step       string `json:"step"`
	Index      *int   `json:"index,omitempty"`
}

// Validate checks a parent link before it is stored: a valid instance id,
// a step id, an index that is not negative.
func (p *ParentRef) Validate() error {
	if p == nil {
		return nil
	}
	if err := ValidateInstanceID(p.WorkflowID); err != nil {
		return fmt.Errorf("parent: %w", err)
	}
	if p.Step == "" {
		return fmt.Errorf("%w: parent without a step", ErrInvalidState)
	}
	if p.Index != nil && *p.Index < 0 {
		return fmt.Errorf("%w: parent index %d is negative", ErrInvalidState, *p.Index)
	}
	return nil
}

// childKey is the key of state.steps.S that holds the id of the child
// workflow a workflow step runs (its latest attempt's).
const childKey = "child"

// Child returns the id of the child workflow the step's latest attempt
// started ("" when none).
func (st *StepState) Child() string {
	if st == nil {
		return ""
	}
	var id string
	if raw, ok := st.Extra[childKey]; !ok || json.Unmarshal(raw, &id) != nil {
		return ""
	}
	return id
}

// SetChild records the child workflow the step's current attempt runs.
func (st *StepState) SetChild(id string) {
	raw, _ := json.Marshal(id) // a string always encodes
	if st.Extra == nil {
		st.Extra = map[string]json.RawMessage{}
	}
	st.Extra[childKey] = raw
}
