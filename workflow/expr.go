// Expressions: jq programs (gojq) in definitions — `when`, `foreach` —
// compiled once per definition revision and run on one JSON document,
// decoded once per decision within the node's DocGate.

package workflow

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/flowd/flowd/internal/third_party/gojq"
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

// Eval runs the program on doc (a value as ExprDoc builds it, or any
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

// ExprDoc is the document the expressions of one decision read:
// {"input", "variables", "steps": {"<id>": {"status", "output"}}}. It is
// decoded once, when the first expression needs it, after its weight
// (DecodedSize) is taken from the node's DocGate, and shared by every
// expression of the decision (each `when`, a foreach); Close gives the
// weight back. Numbers keep their text (json.Number), so large integers
// stay exact.
type ExprDoc struct {
	ctx     context.Context
	gate    *DocGate
	release func() // nil until decoded
	input   decoded
	vars    map[string]decoded
	outputs map[string]decoded
}

// decoded is a value and the text it was decoded from.
type decoded struct {
	raw json.RawMessage
	v   any
}

// NewExprDoc returns the document of one decision, to be decoded within
// gate (nil: no bound); a wait for the gate ends when ctx does.
func NewExprDoc(ctx context.Context, gate *DocGate) *ExprDoc {
	return &ExprDoc{ctx: ctx, gate: gate}
}

// Document returns the document of an instance with input and state as
// they are now. The first call takes the weight of the input, the
// variables and the step outputs from the gate (waiting for it) and
// decodes them; a later one decodes only what is not the text decoded
// before (a decision changes a step's status, and its output only to null
// or [] when it skips it or its foreach gives nothing: no weight to speak
// of). An error says what does not decode, or that the wait for the gate
// ended.
func (d *ExprDoc) Document(input json.RawMessage, state State) (map[string]any, error) {
	if d.release == nil {
		weight := DecodedSize(input)
		for _, raw := range state.Variables {
			weight += DecodedSize(raw)
		}
		for _, st := range state.Steps {
			if st != nil {
				weight += DecodedSize(st.Output)
			}
		}
		release, err := d.gate.Acquire(d.ctx, weight)
		if err != nil {
			return nil, fmt.Errorf("waiting for the memory to decode the instance's document (about %d bytes): %w", weight, err)
		}
		d.release = release
		d.vars, d.outputs = map[string]decoded{}, map[string]decoded{}
	}
	var err error
	doc := map[string]any{}
	if doc["input"], err = d.input.of(input); err != nil {
		return nil, fmt.Errorf("input: %w", err)
	}
	vars := make(map[string]any, len(state.Variables))
	for k, raw := range state.Variables {
		if vars[k], err = cached(d.vars, k, raw); err != nil {
			return nil, fmt.Errorf("variables.%s: %w", k, err)
		}
	}
	doc["variables"] = vars
	steps := make(map[string]any, len(state.Steps))
	for id, st := range state.Steps {
		if st == nil {
			continue
		}
		out, err := cached(d.outputs, id, st.Output)
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
	return doc, nil
}

// Close gives the document's weight back to the gate; the values decoded
// are dropped with it (an expression's result holds none of them: it is
// JSON text). A Document after Close decodes, and weighs, anew.
func (d *ExprDoc) Close() {
	if d.release != nil {
		d.release()
		d.release = nil
	}
	d.input, d.vars, d.outputs = decoded{}, nil, nil
}

// of returns the value of raw: the one decoded before when raw is the same
// text (the same bytes, not a copy: a decision replaces a step's output,
// it never writes into it), else raw decoded now.
func (c *decoded) of(raw json.RawMessage) (any, error) {
	if c.raw != nil && sameBytes(c.raw, raw) {
		return c.v, nil
	}
	v, err := exprValue(raw)
	if err != nil {
		return nil, err
	}
	*c = decoded{raw: raw, v: v}
	return v, nil
}

// cached is decoded.of for the value under key in m.
func cached(m map[string]decoded, key string, raw json.RawMessage) (any, error) {
	c := m[key]
	v, err := c.of(raw)
	m[key] = c
	return v, err
}

// sameBytes reports whether a and b are the same bytes in memory.
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
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
