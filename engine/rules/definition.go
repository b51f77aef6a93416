package rules

import (
	"encoding/json"
	"fmt"

	"github.com/flowd/flowd/sw"
	"github.com/flowd/flowd/workflow"
)

// Definition is a definition revision with its templates compiled once: a
// revision never changes, so the engine caches it for the life of the
// process.
type Definition struct {
	Def *workflow.Definition
	// foreach holds the compiled foreach expression of each step that has
	// one.
	foreach map[string]*workflow.Expr
	inputs  map[string]*workflow.Template
	urls    map[string]*workflow.Template
	bodies  map[string]*workflow.Template
	headers map[string]map[string]*workflow.Template
	flow    controlFlow
	// keys are the event keys of wait steps (events.go).
	keys map[string]*workflow.Template
	// concurrencyKeys and rateKeys are the steps' flow-control keys
	// (flowcontrol.go).
	concurrencyKeys, rateKeys map[string]*workflow.Template
	// Language runs the instances: a flowd DAG (dag.go) or a compiled
	// Serverless Workflow document (serverless.go).
	Language Language
	// Search are the definition's search templates, rendered at every
	// start.
	Search workflow.SearchTemplates
}

// Compile compiles def's templates; an error names the step and field of
// a template that does not compile.
func Compile(def *workflow.Definition) (*Definition, error) {
	c, err := compileLanguage(def)
	if err != nil {
		return nil, err
	}
	c.Search = def.CompileSearch()
	return c, nil
}

// compileLanguage compiles def's templates of its language.
func compileLanguage(def *workflow.Definition) (*Definition, error) {
	if def.Serverless != nil {
		w, err := sw.Parse(def.Serverless)
		if err != nil {
			return nil, err
		}
		// The document's timeout is the instances' deadline.
		d := *def
		d.Timeout = workflow.Duration(w.Timeout)
		c := &Definition{Def: &d}
		c.Language = serverless{c: c, w: w}
		return c, nil
	}
	if def.Code != nil {
		c := &Definition{Def: def}
		c.Language = code{c: c}
		return c, nil
	}
	c := &Definition{Def: def, inputs: map[string]*workflow.Template{}, urls: map[string]*workflow.Template{},
		bodies: map[string]*workflow.Template{}, headers: map[string]map[string]*workflow.Template{},
		foreach: map[string]*workflow.Expr{}, keys: map[string]*workflow.Template{}}
	c.Language = dag{c: c}
	has := def.HasStep
	var err error
	for _, s := range def.Steps {
		// The templates of a foreach step render one iteration each: they
		// may use .item and .index.
		compileTree, compileString := workflow.CompileTemplate, workflow.CompileStringTemplate
		if s.Foreach != "" {
			compileTree, compileString = workflow.CompileIterationTemplate, workflow.CompileIterationStringTemplate
			if c.foreach[s.ID], err = workflow.CompileExpr(s.Foreach); err != nil {
				return nil, fmt.Errorf("step %s foreach: %w", s.ID, err)
			}
		}
		if len(s.Input) > 0 {
			if c.inputs[s.ID], err = compileTree(s.Input, has); err != nil {
				return nil, fmt.Errorf("step %s input: %w", s.ID, err)
			}
		}
		if s.Key != "" {
			if c.keys[s.ID], err = workflow.CompileStringTemplate(s.Key, has); err != nil {
				return nil, fmt.Errorf("step %s key: %w", s.ID, err)
			}
		}
		if r := s.Request; r != nil {
			if c.urls[s.ID], err = compileString(r.URL, has); err != nil {
				return nil, fmt.Errorf("step %s url: %w", s.ID, err)
			}
			if len(r.Body) > 0 {
				if c.bodies[s.ID], err = compileTree(r.Body, has); err != nil {
					return nil, fmt.Errorf("step %s body: %w", s.ID, err)
				}
			}
			c.headers[s.ID] = map[string]*workflow.Template{}
			for k, v := range r.Headers {
				if c.headers[s.ID][k], err = compileString(v, has); err != nil {
					return nil, fmt.Errorf("step %s header %s: %w", s.ID, k, err)
				}
			}
		}
	}
	if err := c.compileControlFlow(); err != nil {
		return nil, err
	}
	if err := c.compileFlowControl(); err != nil {
		return nil, err
	}
	return c, nil
}

// HTTPRequest is the rendered request an http step's task carries as its
// input.
type HTTPRequest struct {
	Method  string            `json:"method"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    json.RawMessage   `json:"body,omitempty"`
}

// render produces a step's task input from the workflow input and the
// outputs of completed steps, each template at most max bytes (see
// workflow.Template.Render). An http step's input is its rendered request.
func (c *Definition) render(id string, inst *workflow.Instance, max int) (json.RawMessage, error) {
	return c.renderWith(id, inst, workflow.StepOutputs(inst.State.Steps), nil, max)
}

// renderWith is render with the outputs given, for iteration it of a
// foreach step (nil for a step without foreach).
func (c *Definition) renderWith(id string, inst *workflow.Instance, outputs map[string]json.RawMessage, it *workflow.Iteration, max int) (json.RawMessage, error) {
	step, _ := c.Def.Step(id)
	if step.Type == workflow.StepTypeHTTP {
		req := HTTPRequest{Method: step.Request.Method, Headers: map[string]string{}}
		var err error
		if req.URL, err = c.urls[id].RenderStringIteration(inst.Input, outputs, it, max); err != nil {
			return nil, err
		}
		for k, t := range c.headers[id] {
			if req.Headers[k], err = t.RenderStringIteration(inst.Input, outputs, it, max); err != nil {
				return nil, err
			}
		}
		if t := c.bodies[id]; t != nil {
			if req.Body, err = t.RenderIteration(inst.Input, outputs, it, max); err != nil {
				return nil, err
			}
		}
		return json.Marshal(req)
	}
	if t := c.inputs[id]; t != nil {
		return t.RenderIteration(inst.Input, outputs, it, max)
	}
	return json.RawMessage("null"), nil
}
