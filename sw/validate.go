// Validation: the document is compiled into the task tree, every problem
// recorded with its JSON pointer so that one answer lists them all.

package sw

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

type validator struct {
	w        *Workflow
	problems []string
	use      map[string]any
}

func (v *validator) add(ptr, format string, args ...any) {
	if ptr == "" {
		ptr = "/"
	}
	v.problems = append(v.problems, ptr+": "+fmt.Sprintf(format, args...))
}

// pointerToken escapes a key for a JSON pointer.
func pointerToken(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

func join(ptr, k string) string { return ptr + "/" + pointerToken(k) }

// keys reports every key of m that is not allowed.
func (v *validator) keys(ptr string, m map[string]any, allowed ...string) {
	for _, k := range sortedKeys(m) {
		ok := false
		for _, a := range allowed {
			ok = ok || a == k
		}
		if !ok {
			v.add(join(ptr, k), "unknown field %q (allowed: %s)", k, strings.Join(allowed, ", "))
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func (v *validator) object(ptr string, x any, what string) (map[string]any, bool) {
	m, ok := x.(map[string]any)
	if !ok {
		v.add(ptr, "%s must be an object, not %s", what, describe(x))
	}
	return m, ok
}

func (v *validator) str(ptr string, x any, what string) (string, bool) {
	s, ok := x.(string)
	if !ok || s == "" {
		v.add(ptr, "%s must be a non-empty string, not %s", what, describe(x))
	}
	return s, ok && s != ""
}

func describe(x any) string {
	switch x := x.(type) {
	case nil:
		return "null"
	case string:
		if x == "" {
			return "an empty string"
		}
		return "a string"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return "a value"
}

// expr compiles a field that is an expression even without "${ }".
func (v *validator) expr(ptr string, x any, scope []string) string {
	s, ok := x.(string)
	if !ok {
		v.add(ptr, "must be a runtime expression (a string), not %s", describe(x))
		return ""
	}
	src := condSource(s)
	if _, err := v.w.exprs.compile(src, scope); err != nil {
		v.add(ptr, "expression %s", err.Error())
		return ""
	}
	return s
}

// template compiles every "${ … }" string inside x.
func (v *validator) template(ptr string, x any, scope []string) {
	switch x := x.(type) {
	case string:
		if src, ok := exprSource(x); ok {
			if _, err := v.w.exprs.compile(src, scope); err != nil {
				v.add(ptr, "expression %s", err.Error())
			}
		}
	case map[string]any:
		for _, k := range sortedKeys(x) {
			v.template(join(ptr, k), x[k], scope)
		}
	case []any:
		for i, e := range x {
			v.template(ptr+"/"+strconv.Itoa(i), e, scope)
		}
	}
}

// valueField compiles a field that is an expression when it is a string and
// a template otherwise (input.from, output.as, export.as).
func (v *validator) valueField(ptr string, x any, scope []string) any {
	if _, ok := x.(string); ok {
		v.expr(ptr, x, scope)
		return x
	}
	v.template(ptr, x, scope)
	return x
}

// list compiles a task list: a non-empty list of single-key mappings.
func (v *validator) list(ptr string, x any, scope []string) *taskList {
	l := &taskList{ptr: ptr}
	v.w.lists[ptr] = l
	items, ok := x.([]any)
	if !ok || len(items) == 0 {
		v.add(ptr, "must be a non-empty list of tasks (each a mapping of one task name to its definition), not %s", describe(x))
		return l
	}
	seen := map[string]bool{}
	for i, it := range items {
		p := ptr + "/" + strconv.Itoa(i)
		m, ok := it.(map[string]any)
		if !ok || len(m) != 1 {
			v.add(p, "a task must be a mapping of one task name to its definition")
			continue
		}
		for name, body := range m {
			if seen[name] {
				v.add(join(p, name), "task name %q is used twice in this list", name)
			}
			seen[name] = true
			l.tasks = append(l.tasks, v.task(name, join(p, name), body, scope))
		}
	}
	for _, t := range l.tasks {
		v.checkThen(t, l)
		for _, c := range t.cases {
			if c.then != thenContinue && c.then != thenExit && c.then != thenEnd && l.index(c.then) < 0 {
				v.add(c.ptr+"/then", "%q is not a task of this list (nor continue, exit, end)", c.then)
			}
		}
	}
	return l
}

func (v *validator) checkThen(t *node, l *taskList) {
	switch t.then {
	case "", thenContinue, thenExit, thenEnd:
		return
	}
	if l == nil {
		v.add(t.ptr+"/then", "a fork branch cannot go to another task (use continue, exit or end)")
		return
	}
	if l.index(t.then) < 0 {
		v.add(t.ptr+"/then", "%q is not a task of this list (nor continue, exit, end)", t.then)
	}
}

// commonFields are allowed on every task.
var commonFields = []string{"if", "input", "output", "export", "timeout", "then", "metadata"}

var kindFields = map[string][]string{
	kindCall: {"call", "with"}, kindDo: {"do"}, kindEmit: {"emit"}, kindFor: {"for", "do", "while"},
	kindFork: {"fork"}, kindListen: {"listen", "foreach"}, kindRaise: {"raise"}, kindRun: {"run"},
	kindSet: {"set"}, kindSwitch: {"switch"}, kindTry: {"try", "catch"}, kindWait: {"wait"},
}

// taskKind tells the kind from the keys: for and try also have do/catch.
func taskKind(m map[string]any) string {
	for _, k := range []string{kindFor, kindTry, kindFork, kindCall, kindEmit, kindListen, kindRaise, kindRun, kindSet, kindSwitch, kindWait, kindDo} {
		if _, ok := m[k]; ok {
			return k
		}
	}
	return ""
}

func (v *validator) task(name, ptr string, body any, scope []string) *node {
	n := &node{name: name, ptr: ptr, scope: scope}
	m, ok := v.object(ptr, body, "a task")
	if !ok {
		return n
	}
	n.def = m
	n.defJSON, _ = encodeJSON(m)
	n.kind = taskKind(m)
	if n.kind == "" {
		v.add(ptr, "unknown task: it has none of call, do, emit, for, fork, listen, raise, run, set, switch, try, wait")
		return n
	}
	v.keys(ptr, m, append(append([]string(nil), commonFields...), kindFields[n.kind]...)...)
	v.common(n, scope)
	v.w.tasks[ptr] = n
	switch n.kind {
	case kindCall:
		v.call(n)
	case kindDo:
		n.list = v.list(ptr+"/do", m["do"], scope)
	case kindEmit:
		v.emit(n)
	case kindFor:
		v.forTask(n)
	case kindFork:
		v.fork(n)
	case kindListen:
		v.listen(n)
	case kindRaise:
		v.raiseTask(n)
	case kindRun:
		v.run(n)
	case kindSet:
		if _, ok := m["set"].(string); ok {
			v.expr(ptr+"/set", m["set"], scope)
		} else if _, ok := m["set"].(map[string]any); ok {
			v.template(ptr+"/set", m["set"], scope)
		} else {
			v.add(ptr+"/set", "set must be an object or a runtime expression, not %s", describe(m["set"]))
		}
	case kindSwitch:
		v.switchTask(n)
	case kindTry:
		v.try(n)
	case kindWait:
		d, err := parseDuration(m["wait"])
		if err != nil {
			v.add(ptr+"/wait", "%s", err.Error())
		}
		n.wait = d
	}
	return n
}

// common compiles the fields every task may have.
func (v *validator) common(n *node, scope []string) {
	m := n.def
	if x, ok := m["if"]; ok {
		n.cond = v.expr(n.ptr+"/if", x, scope)
	}
	if x, ok := m["input"]; ok {
		if in, ok := v.object(n.ptr+"/input", x, "input"); ok {
			v.keys(n.ptr+"/input", in, "from", "schema")
			if f, ok := in["from"]; ok {
				n.inputFrom = v.valueField(n.ptr+"/input/from", f, scope)
			}
			if s, ok := in["schema"]; ok {
				n.inputSchema = v.schema(n.ptr+"/input/schema", s, "input.schema")
			}
		}
	}
	n.outputAs, n.outputSchema = v.transform(n.ptr+"/output", m["output"], scope)
	n.exportAs, n.exportSchema = v.transform(n.ptr+"/export", m["export"], scope)
	if x, ok := m["then"]; ok {
		n.then, _ = v.str(n.ptr+"/then", x, "then")
	}
	if x, ok := m["timeout"]; ok {
		n.timeout = v.timeout(n.ptr+"/timeout", x)
	}
}

// transform compiles output or export: {as, schema}; either is nil when
// not given.
func (v *validator) transform(ptr string, x any, scope []string) (as any, sch *schema) {
	if x == nil {
		return nil, nil
	}
	field := strings.TrimPrefix(ptr[strings.LastIndex(ptr, "/"):], "/")
	m, ok := v.object(ptr, x, field)
	if !ok {
		return nil, nil
	}
	v.keys(ptr, m, "as", "schema")
	if a, ok := m["as"]; ok {
		as = v.valueField(ptr+"/as", a, scope)
	}
	if s, ok := m["schema"]; ok {
		sch = v.schema(ptr+"/schema", s, field+".schema")
	}
	return as, sch
}

// timeout reads {after: duration} or the name of a use.timeouts entry.
func (v *validator) timeout(ptr string, x any) time.Duration {
	if name, ok := x.(string); ok {
		t, ok := v.useEntry("timeouts", name)
		if !ok {
			v.add(ptr, "%q is not declared under use.timeouts", name)
			return 0
		}
		x = t
	}
	m, ok := v.object(ptr, x, "timeout")
	if !ok {
		return 0
	}
	v.keys(ptr, m, "after")
	d, err := parseDuration(m["after"])
	if err != nil {
		v.add(ptr+"/after", "%s", err.Error())
	}
	return d
}

func (v *validator) useEntry(section, name string) (any, bool) {
	s, _ := v.use[section].(map[string]any)
	e, ok := s[name]
	return e, ok
}
