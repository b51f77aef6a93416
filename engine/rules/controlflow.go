package rules

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/flowd/flowd/workflow"
)

// controlFlow is what a definition revision's control flow needs compiled
// once: the `when` programs by step, the output template and, for the
// default output, the steps no other step depends on.
type controlFlow struct {
	whens  map[string]*workflow.Expr
	output *workflow.Template // nil: the default output
	leaves []string
}

// compileControlFlow compiles the `when` programs and the output template
// of c.Def; an error names where the one that does not compile is.
func (c *Definition) compileControlFlow() error {
	f := controlFlow{whens: map[string]*workflow.Expr{}}
	for _, s := range c.Def.Steps {
		if s.When != "" {
			x, err := workflow.CompileExpr(s.When)
			if err != nil {
				return fmt.Errorf("step %s when: %w", s.ID, err)
			}
			f.whens[s.ID] = x
		}
		if len(c.Def.Dependents(s.ID)) == 0 {
			f.leaves = append(f.leaves, s.ID)
		}
	}
	if len(c.Def.Output) > 0 {
		t, err := workflow.CompileTemplate(c.Def.Output, c.Def.HasStep)
		if err != nil {
			return fmt.Errorf("output: %w", err)
		}
		f.output = t
	}
	c.flow = f
	return nil
}

// when evaluates, under ctx (see Env.evalCtx) and within b, step id's
// `when` program on the instance as it is (doc: the decision's document):
// run reports whether the step runs (no program, or a truthy result). An
// error is the program's, to fail the step with.
func (c *Definition) when(ctx context.Context, b workflow.ExprBudget, id string, inst *workflow.Instance, doc *workflow.ExprDoc) (run bool, err error) {
	x := c.flow.whens[id]
	if x == nil {
		return true, nil
	}
	v, err := doc.Document(inst.Input, inst.State)
	if err != nil {
		return false, err
	}
	out, err := x.Eval(ctx, v, b)
	if err != nil {
		return false, err
	}
	return workflow.Truthy(out), nil
}

// output is the output of an instance that completes: the definition's
// output template rendered on its input and step outputs (a SKIPPED step's
// output is null; at most max bytes, see workflow.Template.Render), or
// without one an object mapping each COMPLETED step that no other step
// depends on to its output.
func (c *Definition) output(inst *workflow.Instance, max int) (json.RawMessage, error) {
	outputs := workflow.StepOutputs(inst.State.Steps)
	if c.flow.output != nil {
		return c.flow.output.Render(inst.Input, outputs, max)
	}
	m := make(map[string]json.RawMessage, len(c.flow.leaves))
	for _, id := range c.flow.leaves {
		if st := inst.State.Steps[id]; st != nil && st.Status == workflow.StepCompleted {
			m[id] = outputs[id]
		}
	}
	return json.Marshal(m)
}

// finish gives an instance that has just completed its output. An output
// that does not render fails the instance instead, and the history cause
// of the write says why (Change.Note).
func (c *Definition) finish(inst *workflow.Instance, ch *Change, max int) {
	out, err := c.output(inst, max)
	if err != nil {
		inst.Status = workflow.StatusFailed
		ch.Note = "; the workflow output failed to render: " + err.Error()
		return
	}
	ch.Output = out
}

// skipStep marks a step SKIPPED: no task, no attempt, output null.
func skipStep(st *workflow.StepState) {
	st.Status = workflow.StepSkipped
	st.Output = json.RawMessage("null")
	st.Error = ""
}
