// Errors: raising one, catching it with try/catch (filter, when,
// exceptWhen, retry, do), or faulting the workflow.

package sw

import (
	"encoding/json"
	"strconv"
	"time"
)

// Phases of a try frame.
const (
	phaseTry   = "try"   // the try list runs
	phaseCatch = "catch" // catch.do runs
	phaseRetry = "retry" // waiting for the retry delay
)

// runTry runs the try list of f with in.
func (x *exec) runTry(f *Frame, n *node, in any) {
	lf := x.newFrame(f, n.list.ptr, in)
	lf.List = true
	x.enterList(lf, n.list, in)
}

// raise raises e at task f: the nearest try whose try list contains f and
// whose catch takes e handles it; otherwise the workflow faults.
func (x *exec) raise(f *Frame, e *Error) {
	if x.ended {
		return
	}
	if e.Instance == "" {
		e.Instance = f.Ptr
	}
	x.setCause("faulted: "+causeOf(e), f.Ptr)
	for c := x.parent(f); c != nil; c = x.parent(c) {
		if c.List || c.Phase != phaseTry {
			continue
		}
		if n := x.task(c); n != nil && n.kind == kindTry && x.catch(c, n, e) {
			return
		}
	}
	x.fault(e)
}

// maxCauseError bounds the error a history cause carries: a handler's
// error can be large, and every version's cause is kept.
const maxCauseError = 1000

// causeOf is e as a history cause names it: its title and detail (its type
// without them), cut at maxCauseError characters. It is the only trace of
// an error a retry or a catch handles: the version that raised it keeps
// it in its cause.
func causeOf(e *Error) string {
	s := e.Title
	if e.Detail != "" {
		if s != "" {
			s += ": "
		}
		s += e.Detail
	}
	if s == "" {
		s = e.Type
	}
	if r := []rune(s); len(r) > maxCauseError {
		s = string(r[:maxCauseError-1]) + "…"
	}
	return s
}

// catch handles e at try frame c if its catch takes it.
func (x *exec) catch(c *Frame, n *node, e *Error) bool {
	cd := n.catch
	if cd == nil || !errorMatches(cd.with, e) {
		return false
	}
	in := x.fromRaw(c.Input)
	vars := map[string]any{cd.as: errorValue(e)}
	sc := x.scope(c, cd.scope, in, nil, vars)
	if cd.when != "" {
		ok, err := x.w.exprs.cond(cd.when, in, sc)
		if err != nil {
			x.removeBelow(c)
			x.raise(c, x.exprErr(n, "catch.when", err))
			return true
		}
		if !ok {
			return false
		}
	}
	if cd.exceptWhen != "" {
		ok, err := x.w.exprs.cond(cd.exceptWhen, in, sc)
		if err != nil {
			x.removeBelow(c)
			x.raise(c, x.exprErr(n, "catch.exceptWhen", err))
			return true
		}
		if ok {
			return false
		}
	}
	if r := cd.retry; r != nil {
		retry, err := x.retryAllowed(c, r, in, sc)
		if err != nil {
			x.removeBelow(c)
			x.raise(c, x.exprErr(n, "catch.retry", err))
			return true
		}
		if retry {
			x.removeBelow(c)
			c.Attempt++
			c.Phase = phaseRetry
			x.addItem(c, Item{Kind: ItemTimer, RunAt: x.env.Now.Add(retryDelay(r, c.Attempt))}, roleRetry, 0)
			return true
		}
		if cd.do == nil {
			return false // retries exhausted: the error goes on
		}
	}
	x.removeBelow(c)
	if cd.do == nil {
		x.finishComposite(c, in)
		return true
	}
	c.Phase = phaseCatch
	c.Vars = map[string]json.RawMessage{cd.as: toRaw(vars[cd.as])}
	lf := x.newFrame(c, cd.do.ptr, in)
	lf.List = true
	x.enterList(lf, cd.do, in)
	return true
}

// retryAllowed reports whether the policy allows one more attempt.
func (x *exec) retryAllowed(c *Frame, r *retryPolicy, in any, sc *scope) (bool, error) {
	if r.count >= 0 && c.Attempt >= r.count {
		return false, nil
	}
	if r.limit > 0 && x.env.Now.Sub(c.FirstAt) >= r.limit {
		return false, nil
	}
	if r.when != "" {
		ok, err := x.w.exprs.cond(r.when, in, sc)
		if err != nil || !ok {
			return false, err
		}
	}
	if r.exceptWhen != "" {
		ok, err := x.w.exprs.cond(r.exceptWhen, in, sc)
		if err != nil || ok {
			return false, err
		}
	}
	return true, nil
}

// retryDelay is the delay before retry number attempt (1 for the first):
// constant, linear (delay × attempt) or exponential (delay × 2^(attempt-1)).
func retryDelay(r *retryPolicy, attempt int) time.Duration {
	switch r.backoff {
	case "linear":
		return r.delay * time.Duration(attempt)
	case "exponential":
		d := r.delay
		for i := 1; i < attempt && d < 365*24*time.Hour; i++ {
			d *= 2
		}
		return d
	}
	return r.delay
}

// retryNow runs the try list again from its start with the try's input.
func (x *exec) retryNow(c *Frame) {
	n := x.task(c)
	c.Phase = phaseTry
	x.runTry(c, n, x.fromRaw(c.Input))
}

// errorMatches applies an errors.with filter: every property given must
// match; a type matches as typeMatches says.
func errorMatches(with map[string]any, e *Error) bool {
	for k, want := range with {
		switch k {
		case "type":
			s, _ := want.(string)
			if !typeMatches(s, e.Type) {
				return false
			}
		case "status":
			if n, ok := want.(json.Number); !ok || string(n) != strconv.Itoa(e.Status) {
				return false
			}
		case "instance":
			if want != e.Instance {
				return false
			}
		case "title":
			if want != e.Title {
				return false
			}
		case "details", "detail":
			if want != e.Detail {
				return false
			}
		}
	}
	return true
}
