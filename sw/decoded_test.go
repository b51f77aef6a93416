package sw

import (
	"encoding/json"
	"strings"
	"testing"
)

// bigInput is {"xs": [{"a":1}, …]} with n objects.
func bigInput(n int) string {
	return `{"xs":[` + strings.TrimSuffix(strings.Repeat(`{"a":1},`, n), ",") + `]}`
}

// The tick that evaluates a set reads the task's input where the machine
// keeps it (the frame's raw input), its transformed input, and the
// workflow's: one text decoded once, not once per place. What it allocates
// is one decode of the input and one encode (the task's input kept as
// text), about 3 allocations an object each: 12,148 here for 2,000
// objects, against 24,231 when each place decoded the text again.
func TestAStepDecodesEachTextOnce(t *testing.T) {
	const n = 2000
	d := newDriver(t, ctkHead+`do:
  - count:
      set:
        n: '${ .xs | length }'
`)
	input := bigInput(n)
	d.env.RawInput = json.RawMessage(input)
	rt, st, err := d.w.Start(d.env, json.RawMessage(input))
	if err != nil || len(st.Start) != 1 {
		t.Fatalf("Start: %v, %+v", err, st)
	}
	saved, err := json.Marshal(rt)
	if err != nil {
		t.Fatal(err)
	}
	tick := st.Start[0].ID
	allocs := testing.AllocsPerRun(3, func() {
		var rt Runtime // each run resumes the runtime as stored
		if err := json.Unmarshal(saved, &rt); err != nil {
			t.Fatal(err)
		}
		st, err := d.w.Resume(d.env, &rt, tick, Result{})
		if err != nil || !st.Completed || string(st.Output) != `{"n":2000}` {
			t.Fatalf("Resume: %v, %+v", err, st)
		}
	})
	t.Logf("the tick allocated %.0f times for %d objects", allocs, n)
	if allocs > 7*n {
		t.Errorf("the tick allocated %.0f times for an input of %d objects: it decoded the input more than once", allocs, n)
	}
}

// $workflow and $context are built only for a program that names them,
// and then as before: the workflow's input as given, the context as
// exported.
func TestWorkflowAndContextOnlyForProgramsThatReadThem(t *testing.T) {
	d := newDriver(t, ctkHead+`do:
  - remember:
      set:
        kept: ${ .x }
      export:
        as: '{ seen: .kept }'
  - use:
      set:
        fromWorkflow: ${ $workflow.input.x }
        fromContext: ${ $context.seen }
        neither: ${ 1 + 1 }
        both: '${ [$workflow.input.x, $context.seen] }'
`)
	d.run(`{"x": "given"}`)
	d.wantOutput(`{"fromWorkflow":"given","fromContext":"given","neither":2,"both":["given","given"]}`)
}
