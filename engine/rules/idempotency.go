package rules

import (
	"encoding/json"
	"strconv"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// IdempotencyKey is the key a handler gets with task row of instance inst
// (nil when not known): the instance id and the step id, and the index of
// a foreach iteration; a Serverless Workflow call that a try retried keeps
// the key of its first issue.
func IdempotencyKey(row *store.Task, inst *workflow.Instance) string {
	step := row.StepID
	if inst != nil {
		if st := inst.State.Steps[row.StepID]; st != nil {
			var of string
			if raw, ok := st.Extra[SWKeyOf]; ok && json.Unmarshal(raw, &of) == nil && of != "" {
				step = of
			}
		}
	}
	key := row.InstanceID + "/" + step
	if row.Iteration > 0 {
		key += "/" + strconv.Itoa(row.Iteration-1)
	}
	return key
}
