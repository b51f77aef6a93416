// Expressions: jq programs (gojq) in definitions — `when`, `foreach` —
// compiled once per definition revision and run on one JSON document.

package workflow

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/flowd/flowd/internal/gojq"
)

// Expr is a compiled jq program.
type Expr struct {
	src  string
	code *gojq.Code
}

// CompileExpr compiles src, a jq program. The error says what does not
// parse or compile, without the program (the caller names where it is).
func CompileExpr(src string) (*Expr, error) {
	if strings.TrimSpace(src) == "" {
		return nil, errors.New("is empty (write a jq program)")
	}
	q, err := gojq.Parse(src)
	if err != nil {
		return nil, fmt.Errorf("is not a jq program: %w", err)
	}
	code, err := gojq.Compile(q)
	if err != nil {
		return nil, fmt.Errorf("does not compile: %w", err)
	}
	return &Expr{src: src, code: code}, nil
}

// String returns the program's source.
func (e *Expr) String() string { return e.src }

// Eval runs the program on doc (a value as ExprDocument builds it, or any
// JSON-shaped Go value) within b and returns its first result as JSON. A
// program that gives no result gives null; one that raises an error,
// passes a bound of b or gives a value JSON cannot hold returns an error
// saying so.
func (e *Expr) Eval(ctx context.Context, doc any, b ExprBudget) (json.RawMessage, error) {
	v, err := b.Run(ctx, e.code, e.src, doc)
	if err != nil {
		return nil, err
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("gave a value JSON cannot hold: %w", err)
	}
	return out, nil
}

// Truthy reports whether a JSON value counts as true: anything but false
// and null.
func Truthy(v json.RawMessage) bool {
	s := string(bytes.TrimSpace(v))
	return s != "false" && s != "null" && s != ""
}

// ExprDocument is the document an expression of an instance sees:
// {"input", "variables", "steps": {"<id>": {"status", "output"}}}, plus
// "item" and "index" when item is not nil (an iteration of a foreach).
// Numbers keep their text (json.Number), so large integers stay exact.
func ExprDocument(input json.RawMessage, state State, item json.RawMessage, index int) (map[string]any, error) {
	doc := map[string]any{}
	var err error
	if doc["input"], err = exprValue(input); err != nil {
		return nil, fmt.Errorf("input: %w", err)
	}
	vars := make(map[string]any, len(state.Variables))
	for k, raw := range state.Variables {
		if vars[k], err = exprValue(raw); err != nil {
			return nil, fmt.Errorf("variables.%s: %w", k, err)
		}
	}
	doc["variables"] = vars
	steps := make(map[string]any, len(state.Steps))
	for id, st := range state.Steps {
		if st == nil {
			continue
		}
		out, err := exprValue(st.Output)
		if err != nil {
			return nil, fmt.Errorf("steps.%s.output: %w", id, err)
		}
		status := st.Status
		if status == "" {
			status = StepPending
		}
		steps[id] = map[string]any{"status": string(status), "output": out}
	}
	doc["steps"] = steps
	if item != nil {
		if doc["item"], err = exprValue(item); err != nil {
			return nil, fmt.Errorf("item: %w", err)
		}
		doc["index"] = index
	}
	return doc, nil
}

// exprValue decodes raw JSON into the values gojq takes; empty is null.
func exprValue(raw json.RawMessage) (any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}
