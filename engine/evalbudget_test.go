package engine_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/workflow"
)

// An expression that would build a value larger than the state limit fails
// its instance, on both stores, with an error naming the expression and
// the limit (Config.MaxStateBytes): a flowd `when`, and a Serverless
// Workflow `set`, whose fault points at its task.
func TestExpressionPastTheStateLimitFailsTheInstance(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{maxState: 100000})
		n.define(`
name: bomb
steps:
  - {id: a, type: task, handler: h, when: '("x" * 2147483000) | length > 0'}
`)
		n.define(`
document: {dsl: '1.0.0', namespace: test, name: sw-bomb, version: '1.0.0'}
do:
  - grow:
      set:
        n: '${ ("x" * 1000000000) as $a | ($a + $a) | length }'
`)
		n.start("bomb", "f-1", `{}`)
		inst := n.waitStatus("f-1", workflow.StatusFailed, 20*time.Second)
		want := `when: expression "(\"x\" * 2147483000) | length > 0": ` + "`*`" + ` would build a value of 2147483002 bytes, over --max-state-bytes (100000 bytes)`
		if st := inst.State.Steps["a"]; st == nil || st.Status != workflow.StepFailed || st.Error != want {
			t.Errorf("step a: %+v\nwant FAILED with %q", st, want)
		}
		n.checkHistory(inst)

		n.start("sw-bomb", "s-1", `{}`)
		inst = n.waitStatus("s-1", workflow.StatusFailed, 20*time.Second)
		inst.ShowError()
		var fault struct{ Detail, Instance string }
		if err := json.Unmarshal(inst.Error, &fault); err != nil {
			t.Fatalf("error %s: %v", inst.Error, err)
		}
		if fault.Instance != "/do/0/grow" || !strings.Contains(fault.Detail, "`*` would build a value of 1000000002 bytes, over --max-state-bytes (100000 bytes)") {
			t.Errorf("fault %+v", fault)
		}
	})
}
