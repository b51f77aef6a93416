package rules

import (
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/flowd/flowd/workflow"
)

// compileFlowControl compiles the steps' concurrency and rate-limit keys;
// a foreach step's keys render per iteration (.item and .index).
func (c *Definition) compileFlowControl() error {
	c.concurrencyKeys, c.rateKeys = map[string]*workflow.Template{}, map[string]*workflow.Template{}
	for _, s := range c.Def.Steps {
		compile := workflow.CompileStringTemplate
		if s.Foreach != "" {
			compile = workflow.CompileIterationStringTemplate
		}
		var err error
		if s.Concurrency != nil {
			if c.concurrencyKeys[s.ID], err = compile(s.Concurrency.Key, c.Def.HasStep); err != nil {
				return fmt.Errorf("step %s concurrency key: %w", s.ID, err)
			}
		}
		if s.RateLimit != nil {
			if c.rateKeys[s.ID], err = compile(s.RateLimit.Key, c.Def.HasStep); err != nil {
				return fmt.Errorf("step %s rate_limit key: %w", s.ID, err)
			}
		}
	}
	return nil
}

// taskFlow is the flow control of a new task of step id (it: the
// iteration of a foreach step, nil otherwise): the instance's priority and
// the step's keys rendered now, once, like its input. A key that does not
// render, or renders longer than workflow.MaxFlowKeyLength, fails the step
// as any template does.
func (c *Definition) taskFlow(id string, inst *workflow.Instance, outputs map[string]json.RawMessage, it *workflow.Iteration) (workflow.TaskFlow, error) {
	f := workflow.TaskFlow{Priority: inst.Priority}
	if f.Priority == 0 {
		f.Priority = workflow.DefaultPriority
	}
	step, _ := c.Def.Step(id)
	render := func(what string, t *workflow.Template) (string, error) {
		key, err := t.RenderStringIteration(inst.Input, outputs, it, 4*workflow.MaxFlowKeyLength)
		if err != nil && !errors.Is(err, workflow.ErrRenderTooLarge) {
			return "", fmt.Errorf("%s: %w", what, err)
		}
		if err != nil || utf8.RuneCountInString(key) > workflow.MaxFlowKeyLength {
			return "", fmt.Errorf("%s: the rendered key is longer than %d characters", what, workflow.MaxFlowKeyLength)
		}
		return key, nil
	}
	var err error
	if s := step.Concurrency; s != nil {
		if f.ConcurrencyKey, err = render("concurrency.key", c.concurrencyKeys[id]); err != nil {
			return f, err
		}
		f.ConcurrencyLimit = s.Limit
	}
	if r := step.RateLimit; r != nil {
		if f.RateKey, err = render("rate_limit.key", c.rateKeys[id]); err != nil {
			return f, err
		}
		f.RatePerSecond, f.RateBurst = r.PerSecond, r.BurstOrDefault()
	}
	return f, nil
}
