// Runtime expressions: jq programs (gojq) written "${ … }" in a document,
// compiled once per workflow and scope, run with the DSL's arguments as
// variables.

package sw

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/flowd/flowd/internal/third_party/gojq"
	"github.com/flowd/flowd/workflow"
)

// Version is what $runtime.version says.
var Version = "dev"

// argNames are the arguments every expression sees, in the order their
// values are passed.
var argNames = []string{"$context", "$input", "$output", "$secrets", "$task", "$workflow", "$runtime"}

// exprSource returns the program of a "${ … }" string; ok is false for any
// other string (a literal).
func exprSource(s string) (src string, ok bool) {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "${") && strings.HasSuffix(t, "}") {
		return strings.TrimSpace(t[2 : len(t)-1]), true
	}
	return "", false
}

// condSource returns the program of a field that is an expression even
// without "${ }" (if, when, while, for.in, input.from, …).
func condSource(s string) string {
	if src, ok := exprSource(s); ok {
		return src
	}
	return strings.TrimSpace(s)
}

// compiler compiles programs once per scope (the extra variables visible
// where the program is written: for-loop and catch variables).
type compiler struct {
	mu    sync.Mutex
	codes map[string]*gojq.Code
}

func (c *compiler) compile(src string, scope []string) (*gojq.Code, error) {
	key := strings.Join(scope, ",") + "\x00" + src
	c.mu.Lock()
	defer c.mu.Unlock()
	if code, ok := c.codes[key]; ok {
		return code, nil
	}
	if src == "" {
		return nil, errors.New("is empty (write a jq program)")
	}
	q, err := gojq.Parse(src)
	if err != nil {
		return nil, fmt.Errorf("is not a jq program: %w", err)
	}
	names := append(append([]string(nil), argNames...), scope...)
	code, err := gojq.Compile(q, gojq.WithVariables(names))
	if err != nil {
		return nil, fmt.Errorf("does not compile: %w", err)
	}
	if c.codes == nil {
		c.codes = map[string]*gojq.Code{}
	}
	c.codes[key] = code
	return code, nil
}

// scope is what one evaluation sees: the arguments and the extra
// variables, and the budget it runs within.
type scope struct {
	names  []string       // extra variable names, "$item", …
	args   []any          // values of argNames, or a lazyArg
	vars   map[string]any // values of the extra variables by name
	budget workflow.ExprBudget
}

// lazyArg is an argument costly to build (decoded from the instance's
// JSON text), built only for a program that reads it.
type lazyArg func() any

// run evaluates src on dot within the scope's budget and returns its first
// result as a JSON value (json.Number numbers); no result is null.
func (c *compiler) run(src string, dot any, sc *scope) (any, error) {
	code, err := c.compile(src, sc.names)
	if err != nil {
		return nil, err
	}
	vals := make([]any, 0, len(sc.args)+len(sc.names))
	for i, a := range sc.args {
		if lazy, ok := a.(lazyArg); ok {
			// A jq program names the variables it reads: one whose
			// text does not is not given the value.
			a = nil
			if strings.Contains(src, argNames[i]) {
				a = lazy()
			}
		}
		vals = append(vals, a)
	}
	for _, n := range sc.names {
		vals = append(vals, sc.vars[n])
	}
	// The machine is a pure function with no caller context: the budget's
	// time bound alone bounds the evaluation.
	v, err := sc.budget.Run(context.TODO(), code, src, dot, vals...)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("gave a value JSON cannot hold: %w", err)
	}
	return decodeJSON(b)
}

// cond evaluates a condition field and reports whether it is truthy
// (anything but false and null).
func (c *compiler) cond(s string, dot any, sc *scope) (bool, error) {
	v, err := c.run(condSource(s), dot, sc)
	if err != nil {
		return false, err
	}
	return truthy(v), nil
}

func truthy(v any) bool { return v != nil && v != false }

// value evaluates a field that is an expression even without "${ }" when it
// is a string; any other value is walked like a template.
func (c *compiler) value(v any, dot any, sc *scope) (any, error) {
	if s, ok := v.(string); ok {
		return c.run(condSource(s), dot, sc)
	}
	return c.walk(v, dot, sc)
}

// walk returns v with every "${ … }" string replaced by its value.
func (c *compiler) walk(v any, dot any, sc *scope) (any, error) {
	switch v := v.(type) {
	case string:
		if src, ok := exprSource(v); ok {
			return c.run(src, dot, sc)
		}
		return v, nil
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			r, err := c.walk(e, dot, sc)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			r, err := c.walk(e, dot, sc)
			if err != nil {
				return nil, fmt.Errorf("%d: %w", i, err)
			}
			out[i] = r
		}
		return out, nil
	}
	return v, nil
}
