package instance

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
// workflow a workflow step runs (its latest attempt's); childrenKey the
// array of those of a foreach step's iterations, in item order (null for
// an iteration that has not started one).
const (
	childKey    = "child"
	childrenKey = "children"
)

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

// ChildOf returns the child workflow of a step's iteration (iteration 0:
// the step itself, i+1: item i of a foreach), "" when it has none.
func (st *StepState) ChildOf(iteration int) string {
	if iteration == 0 {
		return st.Child()
	}
	if st == nil {
		return ""
	}
	var ids []*string
	if raw, ok := st.Extra[childrenKey]; !ok || json.Unmarshal(raw, &ids) != nil || iteration > len(ids) || ids[iteration-1] == nil {
		return ""
	}
	return *ids[iteration-1]
}

// SetChildOf records the child workflow a step's iteration runs (see
// ChildOf).
func (st *StepState) SetChildOf(iteration int, id string) {
	if iteration == 0 {
		st.SetChild(id)
		return
	}
	var ids []*string
	if raw, ok := st.Extra[childrenKey]; ok {
		_ = json.Unmarshal(raw, &ids) // unreadable: started again from empty
	}
	for len(ids) < iteration {
		ids = append(ids, nil)
	}
	ids[iteration-1] = &id
	raw, _ := json.Marshal(ids) // strings and nulls always encode
	if st.Extra == nil {
		st.Extra = map[string]json.RawMessage{}
	}
	st.Extra[childrenKey] = raw
}

// ClearChildOf forgets the child workflow of a step's iteration (see
// ChildOf): its attempt ended and the next one starts another.
func (st *StepState) ClearChildOf(iteration int) {
	if st == nil || st.Extra == nil {
		return
	}
	if iteration == 0 {
		delete(st.Extra, childKey)
		return
	}
	var ids []*string
	if raw, ok := st.Extra[childrenKey]; !ok || json.Unmarshal(raw, &ids) != nil || iteration > len(ids) {
		return
	}
	ids[iteration-1] = nil
	raw, _ := json.Marshal(ids) // strings and nulls always encode
	st.Extra[childrenKey] = raw
}
