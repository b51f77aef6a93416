// The pure leaves: set, switch and raise, evaluated by a tick.

package sw

import (
	"encoding/json"
	"strconv"
)

// leaf evaluates a pure leaf with its transformed input in.
func (x *exec) leaf(f *Frame, n *node, in any) *Error {
	sc := x.scope(f, n.scope, in, nil, nil)
	switch n.kind {
	case kindSet:
		out, err := x.w.exprs.walk(n.def["set"], in, sc)
		if err != nil {
			return x.exprErr(n, "set", err)
		}
		f.Input = toRaw(in)
		x.finish(f, out)
	case kindSwitch:
		then := n.then
		for _, c := range n.cases {
			if c.when != "" {
				ok, err := x.w.exprs.cond(c.when, in, sc)
				if err != nil {
					return x.exprErr(n, "switch."+c.name+".when", err)
				}
				if !ok {
					continue
				}
			}
			then = c.then
			break
		}
		f.Input = toRaw(in)
		x.finishThen(f, in, then)
	case kindRaise:
		v, err := x.w.exprs.walk(n.raise, in, sc)
		if err != nil {
			return x.exprErr(n, "raise.error", err)
		}
		e, err := errorFromValue(v, f.Ptr)
		if err != nil {
			return x.exprErr(n, "raise.error", err)
		}
		f.Input = toRaw(in)
		x.raise(f, e)
	}
	return nil
}

// errorFromValue builds a DSL error from an evaluated error object; its
// instance is the raising task unless the object names one.
func errorFromValue(v any, ptr string) (*Error, error) {
	m, _ := v.(map[string]any)
	e := &Error{Instance: ptr}
	e.Type, _ = m["type"].(string)
	switch s := m["status"].(type) {
	case json.Number:
		n, err := strconv.Atoi(string(s))
		if err != nil {
			return nil, fieldError{"status", err}
		}
		e.Status = n
	default:
		return nil, fieldError{"status", errNotInteger}
	}
	e.Title, _ = m["title"].(string)
	e.Detail, _ = m["detail"].(string)
	if i, ok := m["instance"].(string); ok && i != "" {
		e.Instance = i
	}
	return e, nil
}

// errorValue is e as the error variable of a catch sees it.
func errorValue(e *Error) map[string]any {
	m := map[string]any{"type": e.Type, "status": json.Number(strconv.Itoa(e.Status)), "instance": e.Instance}
	if e.Title != "" {
		m["title"] = e.Title
	}
	if e.Detail != "" {
		m["detail"] = e.Detail
	}
	return m
}
