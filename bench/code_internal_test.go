package bench

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/flowd/flowd/workflow"
)

// The checks of the code scenarios' data report every way a completed
// workflow can be wrong.
func TestCodeChecksReportBrokenWorkflows(t *testing.T) {
	step := func(out string, seq string) *workflow.StepState {
		return &workflow.StepState{Status: workflow.StepCompleted, Output: json.RawMessage(out),
			Extra: map[string]json.RawMessage{"kind": json.RawMessage(`"step"`), "seq": json.RawMessage(seq)}}
	}
	chain := func() *workflow.Instance {
		return &workflow.Instance{ID: "w", Input: json.RawMessage(`7`), Output: json.RawMessage(`10`),
			State: workflow.State{Steps: map[string]*workflow.StepState{"a": step(`8`, `1`), "b": step(`9`, `2`), "c": step(`10`, `3`)}}}
	}
	if p := codeChainProblem(chain()); p != "" {
		t.Fatalf("a correct chain: %s", p)
	}
	for _, c := range []struct {
		change func(*workflow.Instance)
		want   string
	}{
		{func(i *workflow.Instance) { delete(i.State.Steps, "b") }, "2 entries recorded, want 3"},
		{func(i *workflow.Instance) { delete(i.State.Steps, "b"); i.State.Steps["x"] = step(`9`, `2`) }, "step b is not recorded"},
		{func(i *workflow.Instance) { i.Output = json.RawMessage(`11`) }, "output 11, want 10"},
		{func(i *workflow.Instance) { i.Input = json.RawMessage(`null`) }, "input null is not the number"},
	} {
		inst := chain()
		c.change(inst)
		if p := codeChainProblem(inst); !strings.Contains(p, c.want) {
			t.Errorf("codeChainProblem: %q, want %q", p, c.want)
		}
	}

	out := `"` + strings.Repeat("x", CodeGrowthOutputSize-2) + `"`
	grown := func() *workflow.Instance {
		return &workflow.Instance{ID: "g", Output: json.RawMessage(`2`),
			State: workflow.State{Steps: map[string]*workflow.StepState{"s00000": step(out, `1`), "s00001": step(out, `2`)}}}
	}
	if p := codeGrowthProblem(grown(), 2); p != "" {
		t.Fatalf("a correct workflow: %s", p)
	}
	for _, c := range []struct {
		change func(*workflow.Instance)
		want   string
	}{
		{func(i *workflow.Instance) { i.State.Steps["s00001"].Extra["seq"] = json.RawMessage(`3`) }, "step s00001 has seq 3, want 2"},
		{func(i *workflow.Instance) { i.State.Steps["s00000"].Output = json.RawMessage(`"short"`) }, "step s00000 is not recorded COMPLETED with its 100-byte output"},
		{func(i *workflow.Instance) { i.State.Steps["s00001"].Status = workflow.StepFailed }, "step s00001 is not recorded COMPLETED"},
		{func(i *workflow.Instance) { delete(i.State.Steps, "s00001") }, "1 entries recorded, want 2"},
		{func(i *workflow.Instance) { i.Output = json.RawMessage(`1`) }, "output 1, want 2"},
	} {
		inst := grown()
		c.change(inst)
		if p := codeGrowthProblem(inst, 2); !strings.Contains(p, c.want) {
			t.Errorf("codeGrowthProblem: %q, want %q", p, c.want)
		}
	}
}
