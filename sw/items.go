// External leaves: call, emit, listen and run become items the engine
// carries out; their arguments are evaluated before the item exists.

package sw

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// httpRequest is the input of an ItemHTTP item (the call executor's
// Request): plain data, every expression already evaluated.
type httpRequest struct {
	Kind       string                     `json:"kind"`
	Method     string                     `json:"method,omitempty"`
	URI        string                     `json:"uri,omitempty"`
	Headers    map[string]string          `json:"headers,omitempty"`
	Query      map[string]string          `json:"query,omitempty"`
	Body       json.RawMessage            `json:"body,omitempty"`
	Output     string                     `json:"output,omitempty"`
	Auth       any                        `json:"auth,omitempty"`
	Document   string                     `json:"document,omitempty"`
	Operation  string                     `json:"operationId,omitempty"`
	Parameters map[string]json.RawMessage `json:"parameters,omitempty"`
	Vars       json.RawMessage            `json:"vars,omitempty"`
	Pointer    string                     `json:"pointer"`
}

func (x *exec) beginExternal(f *Frame, n *node, in any) *Error {
	sc := x.scope(f, n.scope, in, nil, nil)
	var it Item
	switch n.kind {
	case kindCall:
		fn := n.def["call"].(string)
		switch fn {
		case "http", "openapi":
			req, err := x.httpRequest(f, n, fn, in, sc)
			if err != nil {
				return x.exprErr(n, "with", err)
			}
			it = Item{Kind: ItemHTTP, Input: toRaw(req), Timeout: n.timeout}
		default:
			arg := in
			if w, ok := n.def["with"]; ok {
				v, err := x.w.exprs.walk(w, in, sc)
				if err != nil {
					return x.exprErr(n, "with", err)
				}
				arg = v
			}
			it = Item{Kind: ItemCall, Handler: fn, Input: toRaw(arg), Timeout: n.timeout}
		}
	case kindRun:
		wf := n.def["run"].(map[string]any)["workflow"].(map[string]any)
		arg := in
		if w, ok := wf["input"]; ok {
			v, err := x.w.exprs.walk(w, in, sc)
			if err != nil {
				return x.exprErr(n, "run.workflow.input", err)
			}
			arg = v
		}
		name, _ := wf["name"].(string)
		it = Item{Kind: ItemChild, Definition: name, Input: toRaw(arg), Timeout: n.timeout}
	case kindEmit:
		with := n.def["emit"].(map[string]any)["event"].(map[string]any)["with"]
		v, err := x.w.exprs.walk(with, in, sc)
		if err != nil {
			return x.exprErr(n, "emit.event.with", err)
		}
		ev, _ := v.(map[string]any)
		ev["id"] = x.env.WorkflowID + "-sw-" + strconv.Itoa(x.rt.Seq+1) // the id addItem gives next
		ev["specversion"] = "1.0"
		if _, ok := ev["time"]; !ok {
			ev["time"] = x.env.Now.UTC().Format(time.RFC3339)
		}
		it = Item{Kind: ItemEmit, Input: toRaw(ev)}
	case kindListen:
		f.Input = toRaw(in)
		x.startTimeout(f, n)
		f.Outputs = make([]json.RawMessage, len(n.filters))
		f.Received = make([]bool, len(n.filters))
		if n.listenMode == "any" {
			f.Outputs = nil
		}
		for i, flt := range n.filters {
			key, err := x.listenKey(flt, in, sc)
			if err != nil {
				return x.exprErr(n, "listen subject", err)
			}
			x.addItem(f, Item{Kind: ItemListen, Event: flt.typ, Key: key}, roleListen, i)
		}
		return nil
	}
	f.Input = toRaw(in)
	if it.Kind == ItemCall {
		x.reissue(f, &it)
	}
	it = x.addItem(f, it, roleTask, 0) // first: an emit's event id names it
	if it.Kind == ItemCall {
		x.recordIssue(f, it)
	}
	if it.Kind == ItemEmit {
		x.startTimeout(f, n)
	}
	return nil
}

// httpRequest evaluates the with of call: http or call: openapi.
func (x *exec) httpRequest(f *Frame, n *node, kind string, in any, sc *scope) (*httpRequest, error) {
	w := n.def["with"].(map[string]any)
	req := &httpRequest{Kind: kind, Pointer: f.Ptr, Vars: toRaw(in), Output: "content"}
	if o, ok := w["output"].(string); ok {
		req.Output = o
	}
	var err error
	if kind == "http" {
		req.Method, _ = w["method"].(string)
		if req.URI, req.Auth, err = x.endpoint(w["endpoint"], in, sc); err != nil {
			return nil, fieldError{"endpoint", err}
		}
		if req.Headers, err = x.stringMap(w["headers"], in, sc); err != nil {
			return nil, fieldError{"headers", err}
		}
		if req.Query, err = x.stringMap(w["query"], in, sc); err != nil {
			return nil, fieldError{"query", err}
		}
		if b, ok := w["body"]; ok {
			v, err := x.w.exprs.walk(b, in, sc)
			if err != nil {
				return nil, fieldError{"body", err}
			}
			req.Body = toRaw(v)
		}
		return req, nil
	}
	doc, _ := w["document"].(map[string]any)
	if req.Document, req.Auth, err = x.endpoint(doc["endpoint"], in, sc); err != nil {
		return nil, fieldError{"document.endpoint", err}
	}
	req.Operation, _ = w["operationId"].(string)
	if a, ok := w["authentication"]; ok {
		if req.Auth, err = x.auth(a, in, sc); err != nil {
			return nil, fieldError{"authentication", err}
		}
	}
	if p, ok := w["parameters"].(map[string]any); ok {
		req.Parameters = map[string]json.RawMessage{}
		for k, e := range p {
			v, err := x.w.exprs.walk(e, in, sc)
			if err != nil {
				return nil, fieldError{"parameters." + k, err}
			}
			req.Parameters[k] = toRaw(v)
		}
	}
	return req, nil
}

// endpoint evaluates a URI template (kept with its {var} placeholders) or
// an expression giving the URI, and its authentication.
func (x *exec) endpoint(e any, in any, sc *scope) (string, any, error) {
	var uri string
	var auth any
	switch e := e.(type) {
	case string:
		uri = e
	case map[string]any:
		uri, _ = e["uri"].(string)
		if a, ok := e["authentication"]; ok {
			var err error
			if auth, err = x.auth(a, in, sc); err != nil {
				return "", nil, err
			}
		}
	}
	if src, ok := exprSource(uri); ok {
		v, err := x.w.exprs.run(src, in, sc)
		if err != nil {
			return "", nil, err
		}
		s, ok := v.(string)
		if !ok {
			return "", nil, fieldError{"uri", errNotString}
		}
		uri = s
	}
	return uri, auth, nil
}

// auth evaluates an authentication policy, resolving `use` to the
// use.authentications entry it names.
func (x *exec) auth(a any, in any, sc *scope) (any, error) {
	m, _ := a.(map[string]any)
	if name, ok := m["use"].(string); ok {
		use, _ := x.w.doc.(map[string]any)["use"].(map[string]any)
		auths, _ := use["authentications"].(map[string]any)
		a = auths[name]
	}
	return x.w.exprs.walk(a, in, sc)
}

// stringMap evaluates headers or query: an object (or an expression giving
// one) whose values become strings.
func (x *exec) stringMap(v any, in any, sc *scope) (map[string]string, error) {
	if v == nil {
		return nil, nil
	}
	r, err := x.w.exprs.walk(v, in, sc)
	if err != nil {
		return nil, err
	}
	m, ok := r.(map[string]any)
	if !ok {
		return nil, errNotObject
	}
	out := make(map[string]string, len(m))
	for k, e := range m {
		if s, ok := e.(string); ok {
			out[k] = s
		} else {
			out[k] = string(toRaw(e))
		}
	}
	return out, nil
}

// received applies an event delivered to filter i of listen task f.
func (x *exec) received(f *Frame, i int, res Result) {
	n := x.task(f)
	if res.Error != nil {
		e := *res.Error
		x.raise(f, &e)
		return
	}
	ev := x.fromRaw(res.Output)
	val := ev
	if n.listenRead != "envelope" {
		m, _ := ev.(map[string]any)
		val = m["data"]
	}
	switch n.listenMode {
	case "all":
		f.Outputs[i] = toRaw(val)
		f.Received[i] = true
		all := make([]any, len(f.Outputs))
		for j, o := range f.Outputs {
			if !f.Received[j] {
				x.setCause("received event", f.Ptr)
				return
			}
			all[j] = x.fromRaw(o)
		}
		x.finish(f, all)
	case "any":
		f.Outputs = append(f.Outputs, toRaw(val))
		events := make([]any, len(f.Outputs))
		for j, o := range f.Outputs {
			events[j] = x.fromRaw(o)
		}
		if n.listenUntil != "" {
			in := x.fromRaw(f.Input)
			done, err := x.w.exprs.cond(n.listenUntil, events, x.scope(f, n.scope, in, nil, nil))
			if err != nil {
				x.raise(f, x.exprErr(n, "listen.to.until", err))
				return
			}
			if !done {
				// Waits again for the same event: its key as the listen
				// started, on the input it started with.
				key, err := x.listenKey(n.filters[i], in, x.scope(f, n.scope, in, nil, nil))
				if err != nil {
					x.raise(f, x.exprErr(n, "listen subject", err))
					return
				}
				x.addItem(f, Item{Kind: ItemListen, Event: n.filters[i].typ, Key: key}, roleListen, i)
				x.setCause("received event", f.Ptr)
				return
			}
		}
		x.finish(f, events)
	default:
		x.finish(f, []any{val})
	}
}

// listenKey is the flowd event key a listen filter waits for: its subject,
// evaluated on the task's input when it is an expression ("" when none).
func (x *exec) listenKey(flt eventFilter, in any, sc *scope) (string, error) {
	if _, isExpr := exprSource(flt.subject); !isExpr {
		return flt.subject, nil
	}
	v, err := x.w.exprs.walk(flt.subject, in, sc)
	if err != nil {
		return "", err
	}
	key, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("the subject must be a string, not %s", describe(v))
	}
	return key, nil
}
