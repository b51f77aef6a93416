package sw

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/flowd/flowd/workflow"
)

// builtinCalls are the call types of the DSL; any other name is a flowd
// handler.
var builtinCalls = map[string]bool{"http": true, "openapi": true, "grpc": true, "asyncapi": true, "a2a": true, "mcp": true}

func (v *validator) call(n *node) {
	p := n.ptr
	fn, ok := v.str(p+"/call", n.def["call"], "call")
	if !ok {
		return
	}
	with := n.def["with"]
	switch {
	case fn == "http":
		if w, ok := v.object(p+"/with", with, "with"); ok {
			v.keys(p+"/with", w, "method", "endpoint", "headers", "query", "body", "output", "redirect")
			v.str(p+"/with/method", w["method"], "method")
			v.endpoint(p+"/with/endpoint", w["endpoint"], n.scope)
			v.callOutput(p+"/with/output", w)
			for _, k := range []string{"headers", "query", "body"} {
				v.template(p+"/with/"+k, w[k], n.scope)
			}
		}
	case fn == "openapi":
		if w, ok := v.object(p+"/with", with, "with"); ok {
			v.keys(p+"/with", w, "document", "operationId", "parameters", "authentication", "output", "redirect")
			if d, ok := v.object(p+"/with/document", w["document"], "document"); ok {
				v.keys(p+"/with/document", d, "name", "endpoint")
				v.endpoint(p+"/with/document/endpoint", d["endpoint"], n.scope)
			}
			v.str(p+"/with/operationId", w["operationId"], "operationId")
			v.template(p+"/with/parameters", w["parameters"], n.scope)
			if a, ok := w["authentication"]; ok {
				v.auth(p+"/with/authentication", a, n.scope)
			}
			v.callOutput(p+"/with/output", w)
		}
	case builtinCalls[fn]:
		v.add(p+"/call", "call: %s is not supported (supported: http, openapi, or the name of a flowd handler)", fn)
	case strings.Contains(fn, "://") || strings.Contains(fn, "@"):
		v.add(p+"/call", "call: %s names a function of a catalog; catalogs are not supported", fn)
	case strings.HasPrefix(fn, "flowd:"):
		v.add(p+"/call", "call: %s names a queue of the engine's own, not a handler", fn)
	case workflow.HandlerNameProblem(fn) != "":
		v.add(p+"/call", "call: the handler name %s", workflow.HandlerNameProblem(fn))
	default:
		if _, declared := v.useEntry("functions", fn); declared {
			v.add(p+"/call", "call: %s names a function declared under use.functions; such functions are not supported (call http, openapi or a flowd handler)", fn)
			return
		}
		v.template(p+"/with", with, n.scope)
	}
}

func (v *validator) callOutput(ptr string, w map[string]any) {
	if o, ok := w["output"]; ok {
		if s, _ := o.(string); s != "content" && s != "response" && s != "raw" {
			v.add(ptr, "output must be content, response or raw")
		}
	}
}

// endpoint checks a URI template or {uri, authentication}.
func (v *validator) endpoint(ptr string, x any, scope []string) {
	if s, ok := x.(string); ok {
		v.template(ptr, s, scope)
		return
	}
	m, ok := v.object(ptr, x, "endpoint (a URI or {uri, authentication})")
	if !ok {
		return
	}
	v.keys(ptr, m, "uri", "authentication")
	if u, ok := v.str(ptr+"/uri", m["uri"], "uri"); ok {
		v.template(ptr+"/uri", u, scope)
	}
	if a, ok := m["authentication"]; ok {
		v.auth(ptr+"/authentication", a, scope)
	}
}

// auth checks an authentication policy: basic or bearer, inline or by the
// name of a use.authentications entry.
func (v *validator) auth(ptr string, x any, scope []string) {
	m, ok := v.object(ptr, x, "authentication")
	if !ok {
		return
	}
	if name, ok := m["use"]; ok {
		s, _ := name.(string)
		if _, declared := v.useEntry("authentications", s); !declared {
			v.add(ptr+"/use", "%q is not declared under use.authentications", s)
		}
		return
	}
	v.authPolicy(ptr, m, scope)
}

func (v *validator) authPolicy(ptr string, m map[string]any, scope []string) {
	if len(m) != 1 {
		v.add(ptr, "an authentication policy has exactly one scheme (basic or bearer)")
		return
	}
	for scheme, body := range m {
		switch scheme {
		case "basic", "bearer":
			if b, ok := v.object(join(ptr, scheme), body, scheme); ok {
				if scheme == "basic" {
					v.keys(join(ptr, scheme), b, "username", "password")
				} else {
					v.keys(join(ptr, scheme), b, "token")
				}
				v.template(join(ptr, scheme), b, scope)
			}
		case "oauth2", "oidc", "digest", "certificate":
			v.add(join(ptr, scheme), "%s authentication is not supported (supported: basic, bearer)", scheme)
		default:
			v.add(join(ptr, scheme), "unknown authentication scheme %q (supported: basic, bearer)", scheme)
		}
	}
}

func (v *validator) emit(n *node) {
	p := n.ptr + "/emit"
	e, ok := v.object(p, n.def["emit"], "emit")
	if !ok {
		return
	}
	v.keys(p, e, "event")
	ev, ok := v.object(p+"/event", e["event"], "event")
	if !ok {
		return
	}
	v.keys(p+"/event", ev, "with")
	with, ok := v.object(p+"/event/with", ev["with"], "event.with")
	if !ok {
		return
	}
	if _, ok := with["type"]; !ok {
		v.add(p+"/event/with/type", "an event needs a type")
	}
	if _, ok := with["source"]; !ok {
		v.add(p+"/event/with/source", "an event needs a source")
	}
	v.template(p+"/event/with", with, n.scope)
}

func (v *validator) forTask(n *node) {
	p := n.ptr + "/for"
	f, ok := v.object(p, n.def["for"], "for")
	if !ok {
		return
	}
	v.keys(p, f, "each", "in", "at")
	n.forEach, n.forAt = "$item", "$index"
	if x, ok := f["each"]; ok {
		if s, ok := v.str(p+"/each", x, "each"); ok {
			n.forEach = "$" + s
		}
	}
	if x, ok := f["at"]; ok {
		if s, ok := v.str(p+"/at", x, "at"); ok {
			n.forAt = "$" + s
		}
	}
	n.forIn = v.expr(p+"/in", f["in"], n.scope)
	inner := withVars(n.scope, n.forEach, n.forAt)
	if x, ok := n.def["while"]; ok {
		n.forWhile = v.expr(n.ptr+"/while", x, inner)
	}
	n.list = v.list(n.ptr+"/do", n.def["do"], inner)
}

// withVars returns scope plus names, without duplicates, in a stable order.
func withVars(scope []string, names ...string) []string {
	out := append([]string(nil), scope...)
	for _, nm := range names {
		dup := false
		for _, s := range out {
			dup = dup || s == nm
		}
		if !dup {
			out = append(out, nm)
		}
	}
	return out
}

func (v *validator) fork(n *node) {
	p := n.ptr + "/fork"
	f, ok := v.object(p, n.def["fork"], "fork")
	if !ok {
		return
	}
	v.keys(p, f, "branches", "compete")
	if c, ok := f["compete"]; ok {
		b, isBool := c.(bool)
		if !isBool {
			v.add(p+"/compete", "compete must be true or false")
		}
		n.compete = b
	}
	l := v.list(p+"/branches", f["branches"], n.scope)
	n.branches = l.tasks
	for _, b := range n.branches {
		if b.then != "" && b.then != thenContinue && b.then != thenExit && b.then != thenEnd && l.index(b.then) >= 0 {
			v.checkThen(b, nil)
		}
	}
}

func (v *validator) listen(n *node) {
	p := n.ptr + "/listen"
	if _, ok := n.def["foreach"]; ok {
		v.add(n.ptr+"/foreach", "listen foreach is not supported")
	}
	l, ok := v.object(p, n.def["listen"], "listen")
	if !ok {
		return
	}
	v.keys(p, l, "to", "read")
	n.listenRead = "data"
	if r, ok := l["read"]; ok {
		s, _ := r.(string)
		if s != "data" && s != "envelope" && s != "raw" {
			v.add(p+"/read", "read must be data, envelope or raw")
		}
		n.listenRead = s
	}
	to, ok := v.object(p+"/to", l["to"], "to")
	if !ok {
		return
	}
	v.keys(p+"/to", to, "one", "any", "all", "until")
	for _, mode := range []string{"one", "any", "all"} {
		x, ok := to[mode]
		if !ok {
			continue
		}
		if n.listenMode != "" {
			v.add(p+"/to/"+mode, "listen to one of one, any or all, not both %s and %s", n.listenMode, mode)
			continue
		}
		n.listenMode = mode
		if mode == "one" {
			n.filters = append(n.filters, v.filter(p+"/to/one", x, n.scope))
			continue
		}
		fs, ok := x.([]any)
		if !ok || len(fs) == 0 {
			v.add(p+"/to/"+mode, "must be a non-empty list of event filters (listening to every event is not supported)")
			continue
		}
		for i, f := range fs {
			n.filters = append(n.filters, v.filter(p+"/to/"+mode+"/"+strconv.Itoa(i), f, n.scope))
		}
	}
	if n.listenMode == "" {
		v.add(p+"/to", "listen to one, any or all")
	}
	if u, ok := to["until"]; ok {
		if n.listenMode != "any" {
			v.add(p+"/to/until", "until applies to any only")
		} else if _, isStr := u.(string); !isStr {
			v.add(p+"/to/until", "until given as events to consume is not supported (write a runtime expression)")
		} else {
			n.listenUntil = v.expr(p+"/to/until", u, n.scope)
		}
	}
}

// filter reads an event filter: flowd matches events by type and subject.
// The type is literal; the subject may be a runtime expression, evaluated
// on the task's input when the listen starts (an order waits for the events
// of its own id).
func (v *validator) filter(ptr string, x any, scope []string) eventFilter {
	var f eventFilter
	m, ok := v.object(ptr, x, "an event filter")
	if !ok {
		return f
	}
	if _, ok := m["correlate"]; ok {
		v.add(ptr+"/correlate", "event correlation is not supported")
	}
	v.keys(ptr, m, "with", "correlate")
	w, ok := v.object(ptr+"/with", m["with"], "with")
	if !ok {
		return f
	}
	for _, k := range sortedKeys(w) {
		if k != "type" && k != "subject" {
			v.add(join(ptr+"/with", k), "filtering events on %s is not supported (supported: type, subject)", k)
		}
	}
	f.typ, _ = v.str(ptr+"/with/type", w["type"], "type")
	if s, ok := w["subject"]; ok {
		f.subject, _ = v.str(ptr+"/with/subject", s, "subject")
	}
	if _, isExpr := exprSource(f.typ); isExpr {
		v.add(ptr+"/with/type", "an event type given by an expression is not supported (write the type)")
	}
	if _, isExpr := exprSource(f.subject); isExpr {
		v.template(ptr+"/with/subject", f.subject, scope)
	}
	return f
}

func (v *validator) raiseTask(n *node) {
	p := n.ptr + "/raise"
	r, ok := v.object(p, n.def["raise"], "raise")
	if !ok {
		return
	}
	v.keys(p, r, "error")
	e := r["error"]
	if name, ok := e.(string); ok {
		ref, declared := v.useEntry("errors", name)
		if !declared {
			v.add(p+"/error", "%q is not declared under use.errors", name)
			return
		}
		e = ref
	}
	if v.errorDef(p+"/error", e, n.scope) {
		n.raise = e
	}
}

// errorDef checks an error object: type and status required.
func (v *validator) errorDef(ptr string, x any, scope []string) bool {
	m, ok := v.object(ptr, x, "an error")
	if !ok {
		return false
	}
	v.keys(ptr, m, "type", "status", "title", "detail", "instance")
	good := true
	if _, ok := m["type"].(string); !ok {
		v.add(ptr+"/type", "an error needs a type (a URI)")
		good = false
	}
	switch s := m["status"].(type) {
	case json.Number:
	case string:
		if _, isExpr := exprSource(s); !isExpr {
			v.add(ptr+"/status", "status must be an integer")
			good = false
		}
	default:
		v.add(ptr+"/status", "an error needs a status (an integer)")
		good = false
	}
	v.template(ptr, m, scope)
	return good
}

func (v *validator) run(n *node) {
	p := n.ptr + "/run"
	r, ok := v.object(p, n.def["run"], "run")
	if !ok {
		return
	}
	for _, k := range []string{"container", "script", "shell"} {
		if _, ok := r[k]; ok {
			v.add(p, "run: %s is not supported (supported: workflow)", k)
			return
		}
	}
	v.keys(p, r, "workflow", "await", "return")
	if a, ok := r["await"]; ok && a != true {
		v.add(p+"/await", "run without awaiting is not supported")
	}
	wf, ok := v.object(p+"/workflow", r["workflow"], "workflow")
	if !ok {
		return
	}
	v.keys(p+"/workflow", wf, "namespace", "name", "version", "input")
	v.str(p+"/workflow/name", wf["name"], "name")
	v.template(p+"/workflow/input", wf["input"], n.scope)
}

func (v *validator) switchTask(n *node) {
	p := n.ptr + "/switch"
	cases, ok := n.def["switch"].([]any)
	if !ok || len(cases) == 0 {
		v.add(p, "must be a non-empty list of cases")
		return
	}
	for i, c := range cases {
		cp := p + "/" + strconv.Itoa(i)
		m, ok := c.(map[string]any)
		if !ok || len(m) != 1 {
			v.add(cp, "a case must be a mapping of one case name to its definition")
			continue
		}
		for name, body := range m {
			bp := join(cp, name)
			b, ok := v.object(bp, body, "a case")
			if !ok {
				continue
			}
			v.keys(bp, b, "when", "then")
			sc := switchCase{name: name, ptr: bp}
			if w, ok := b["when"]; ok {
				sc.when = v.expr(bp+"/when", w, n.scope)
			}
			sc.then, _ = v.str(bp+"/then", b["then"], "then")
			n.cases = append(n.cases, sc)
		}
	}
}
