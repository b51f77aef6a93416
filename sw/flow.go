// Running tasks in sequence: entering a task, finishing it, the flow
// directives, and the composites that run task lists (do, for, try).

package sw

import "encoding/json"

// enterList starts list l in its frame lf with data.
func (x *exec) enterList(lf *Frame, l *taskList, data any) {
	lf.Index = 0
	x.enter(lf, l.tasks[0], data, 0)
}

// enter makes task n the next task under parent with raw input. A pure
// leaf, or a task with `if`, waits for a tick so that its evaluation is a
// version of its own; any other task starts now, unless something of it
// fails to evaluate: then the tick's Resume raises that error in its own
// version.
func (x *exec) enter(parent *Frame, n *node, raw any, branch int) *Frame {
	f := x.newFrame(parent, n.ptr, raw)
	f.Branch = branch
	if n.cond != "" || n.isPure() {
		x.addItem(f, Item{Kind: ItemTick}, roleTask, 0)
		return f
	}
	if e := x.begin(f, n, raw); e != nil {
		x.addItem(f, Item{Kind: ItemTick}, roleTask, 0)
	}
	return f
}

// begin runs task n in frame f (its `if` already passed). It returns an
// error only when something failed to evaluate before anything changed;
// errors the task raises by running are raised here.
func (x *exec) begin(f *Frame, n *node, raw any) *Error {
	if n.inputSchema != nil {
		if e := n.inputSchema.check(raw, n.ptr); e != nil {
			return e
		}
	}
	in := raw
	if n.inputFrom != nil {
		v, err := x.w.exprs.value(n.inputFrom, raw, x.scope(f, n.scope, raw, nil, nil))
		if err != nil {
			return x.exprErr(n, "input.from", err)
		}
		in = v
	}
	switch n.kind {
	case kindSet, kindSwitch, kindRaise:
		return x.leaf(f, n, in)
	case kindWait:
		f.Input = toRaw(in)
		if n.wait == 0 {
			x.finish(f, in)
			return nil
		}
		x.addItem(f, Item{Kind: ItemTimer, RunAt: x.env.Now.Add(n.wait)}, roleTask, 0)
	case kindDo:
		f.Input = toRaw(in)
		x.startTimeout(f, n)
		lf := x.newFrame(f, n.list.ptr, in)
		lf.List = true
		x.enterList(lf, n.list, in)
	case kindFor:
		return x.beginFor(f, n, in)
	case kindTry:
		f.Input = toRaw(in)
		f.Phase = phaseTry
		f.FirstAt = x.env.Now
		x.startTimeout(f, n)
		x.runTry(f, n, in)
	case kindFork:
		x.beginFork(f, n, in)
	default:
		return x.beginExternal(f, n, in)
	}
	return nil
}

// startTimeout arms the task's timeout as a timer item; call, http and child
// items carry theirs in Item.Timeout instead.
func (x *exec) startTimeout(f *Frame, n *node) {
	if n.timeout > 0 {
		x.addItem(f, Item{Kind: ItemTimer, RunAt: x.env.Now.Add(n.timeout)}, roleTimeout, 0)
	}
}

// tick evaluates a task that waited for its own version.
func (x *exec) tick(f *Frame, n *node) {
	raw := x.fromRaw(f.RawInput)
	if n.cond != "" {
		ok, err := x.w.exprs.cond(n.cond, raw, x.scope(f, n.scope, raw, nil, nil))
		if err != nil {
			x.raise(f, x.exprErr(n, "if", err))
			return
		}
		if !ok {
			x.setCause("skipped", f.Ptr)
			x.advance(f, raw, "")
			return
		}
	}
	if e := x.begin(f, n, raw); e != nil {
		x.raise(f, e)
	}
}

// itemDone applies the result of a task's own item.
func (x *exec) itemDone(f *Frame, it Item, res Result) {
	n := x.task(f)
	if it.Kind == ItemTick {
		x.tick(f, n)
		return
	}
	x.recordAttempts(f, it, res)
	if res.Error != nil {
		e := *res.Error
		x.raise(f, &e)
		return
	}
	var out any
	switch n.kind {
	case kindEmit:
		out = x.fromRaw(it.Input)
	case kindWait:
		out = x.fromRaw(f.Input)
	default:
		out = x.fromRaw(res.Output)
	}
	x.finish(f, out)
}

// finishComposite completes composite task f (do, for, try, fork) with its
// raw output in a version of its own, as every task that finishes: the
// subtask that ended it has its version now, and a tick, due at once,
// finishes f in the next (`task <f> completed`).
func (x *exec) finishComposite(f *Frame, out any) {
	x.cancelItemsOf(f) // its timeout: it has done its work
	f.Result = toRaw(out)
	x.addItem(f, Item{Kind: ItemTick}, roleFinish, 0)
}

// finish completes task f with its raw output.
func (x *exec) finish(f *Frame, out any) {
	x.finishThen(f, out, x.task(f).then)
}

// finishThen completes task f with its raw output and goes on by then:
// output.as transforms the output, output.schema checks it, export.as
// makes the new context, export.schema checks that.
func (x *exec) finishThen(f *Frame, out any, then string) {
	n := x.task(f)
	in := x.fromRaw(f.Input)
	if n.outputAs != nil {
		v, err := x.w.exprs.value(n.outputAs, out, x.scope(f, n.scope, in, out, nil))
		if err != nil {
			x.raise(f, x.exprErr(n, "output.as", err))
			return
		}
		out = v
	}
	if n.outputSchema != nil {
		if e := n.outputSchema.check(out, n.ptr); e != nil {
			x.raise(f, e)
			return
		}
	}
	if n.exportAs != nil || n.exportSchema != nil {
		if e := x.export(f, n, in, out); e != nil {
			x.raise(f, e)
			return
		}
	}
	x.setCause("completed", f.Ptr)
	x.advance(f, out, then)
}

// export makes the new context of finished task f from its transformed
// output: export.as (the context unchanged without one), checked by
// export.schema before it replaces the old one, so that a context failing
// its schema is never seen by a catch or a later task.
func (x *exec) export(f *Frame, n *node, in, out any) *Error {
	ctx := x.fromRaw(x.rt.Context)
	if n.exportAs != nil {
		v, err := x.w.exprs.value(n.exportAs, out, x.scope(f, n.scope, in, out, nil))
		if err != nil {
			return x.exprErr(n, "export.as", err)
		}
		ctx = v
	}
	if n.exportSchema != nil {
		if e := n.exportSchema.check(ctx, n.ptr); e != nil {
			return e
		}
	}
	if n.exportAs != nil {
		x.rt.Context = toRaw(ctx)
	}
	return nil
}

// advance leaves finished task f with out and goes on by then: the next
// task of the list, a named one, out of the list (exit), or the end.
func (x *exec) advance(f *Frame, out any, then string) {
	p := x.parent(f)
	x.removeBelow(f)
	x.removeFrame(f)
	if x.ended || p == nil {
		return
	}
	if then == thenEnd {
		x.complete(out)
		return
	}
	if !p.List {
		x.branchDone(p, f.Branch, out)
		return
	}
	l := x.w.lists[p.Ptr]
	switch then {
	case thenExit:
		x.listDone(p, out, true)
		return
	case "", thenContinue:
		p.Index++
	default:
		p.Index = l.index(then)
	}
	if p.Index >= len(l.tasks) {
		x.listDone(p, out, false)
		return
	}
	x.enter(p, l.tasks[p.Index], out, 0)
}

// listDone ends a task list with out: its owner finishes (for: goes on to
// its next iteration unless exit ended the loop); the document's list ends
// the workflow.
func (x *exec) listDone(lf *Frame, out any, exit bool) {
	owner := x.parent(lf)
	x.removeFrame(lf)
	if owner == nil {
		x.complete(out)
		return
	}
	n := x.task(owner)
	if n.kind == kindFor && !exit {
		owner.Index++
		if e := x.iterate(owner, n, out); e != nil {
			x.raise(owner, e)
		}
		return
	}
	x.finishComposite(owner, out)
}

// beginFor evaluates the collection and starts the first iteration.
func (x *exec) beginFor(f *Frame, n *node, in any) *Error {
	v, err := x.w.exprs.value(n.forIn, in, x.scope(f, n.scope, in, nil, nil))
	if err != nil {
		return x.exprErr(n, "for.in", err)
	}
	var coll []any
	switch v := v.(type) {
	case nil:
	case []any:
		coll = v
	case map[string]any:
		for _, k := range sortedKeys(v) {
			coll = append(coll, v[k])
		}
	default:
		coll = []any{v}
	}
	if e := x.checkWhile(f, n, in, in, coll, 0); e != nil {
		return e
	}
	f.Input = toRaw(in)
	for _, c := range coll {
		f.Collection = append(f.Collection, toRaw(c))
	}
	f.Index = 0
	x.startTimeout(f, n)
	if e := x.iterate(f, n, in); e != nil {
		x.raise(f, e)
	}
	return nil
}

// checkWhile evaluates while for iteration i without changing anything.
func (x *exec) checkWhile(f *Frame, n *node, in, data any, coll []any, i int) *Error {
	if n.forWhile == "" || i >= len(coll) {
		return nil
	}
	vars := map[string]any{n.forEach: coll[i], n.forAt: i}
	_, err := x.w.exprs.cond(n.forWhile, data, x.scope(f, withVars(n.scope, n.forEach, n.forAt), in, nil, vars))
	if err != nil {
		return x.exprErr(n, "while", err)
	}
	return nil
}

// iterate runs iteration f.Index of a for with data, the previous
// iteration's output; past the last item, or when while is false, the
// for finishes with data.
func (x *exec) iterate(f *Frame, n *node, data any) *Error {
	if f.Index >= len(f.Collection) {
		x.finishComposite(f, data)
		return nil
	}
	item := x.fromRaw(f.Collection[f.Index])
	vars := map[string]any{n.forEach: item, n.forAt: f.Index}
	if n.forWhile != "" {
		in := x.fromRaw(f.Input)
		ok, err := x.w.exprs.cond(n.forWhile, data, x.scope(f, withVars(n.scope, n.forEach, n.forAt), in, nil, vars))
		if err != nil {
			return x.exprErr(n, "while", err)
		}
		if !ok {
			x.finishComposite(f, data)
			return nil
		}
	}
	f.Vars = map[string]json.RawMessage{}
	for k, v := range vars {
		f.Vars[k] = toRaw(v)
	}
	lf := x.newFrame(f, n.list.ptr, data)
	lf.List = true
	x.enterList(lf, n.list, data)
	return nil
}

func (x *exec) exprErr(n *node, field string, err error) *Error {
	return exprError(n.ptr, fieldError{field, err})
}

type fieldError struct {
	field string
	err   error
}

func (e fieldError) Error() string { return e.field + ": " + e.err.Error() }
func (e fieldError) Unwrap() error { return e.err }
