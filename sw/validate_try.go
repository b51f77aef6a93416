package sw

import (
	"encoding/json"
	"strconv"
)

func (v *validator) try(n *node) {
	n.list = v.list(n.ptr+"/try", n.def["try"], n.scope)
	p := n.ptr + "/catch"
	c, ok := v.object(p, n.def["catch"], "catch")
	if !ok {
		return
	}
	v.keys(p, c, "errors", "as", "when", "exceptWhen", "retry", "do")
	cd := &catchDef{as: "$error"}
	if x, ok := c["as"]; ok {
		if s, ok := v.str(p+"/as", x, "as"); ok {
			cd.as = "$" + s
		}
	}
	cd.scope = withVars(n.scope, cd.as)
	if x, ok := c["errors"]; ok {
		if e, ok := v.object(p+"/errors", x, "errors"); ok {
			v.keys(p+"/errors", e, "with")
			if w, ok := e["with"]; ok {
				if wm, ok := v.object(p+"/errors/with", w, "errors.with"); ok {
					v.keys(p+"/errors/with", wm, "type", "status", "instance", "title", "details", "detail")
					cd.with = wm
				}
			}
		}
	}
	if x, ok := c["when"]; ok {
		cd.when = v.expr(p+"/when", x, cd.scope)
	}
	if x, ok := c["exceptWhen"]; ok {
		cd.exceptWhen = v.expr(p+"/exceptWhen", x, cd.scope)
	}
	if x, ok := c["retry"]; ok {
		cd.retry = v.retry(p+"/retry", x, cd.scope)
	}
	if x, ok := c["do"]; ok {
		cd.do = v.list(p+"/do", x, cd.scope)
	}
	n.catch = cd
}

// retry reads a retry policy, inline or by the name of a use.retries entry.
func (v *validator) retry(ptr string, x any, scope []string) *retryPolicy {
	if name, ok := x.(string); ok {
		ref, declared := v.useEntry("retries", name)
		if !declared {
			v.add(ptr, "%q is not declared under use.retries", name)
			return nil
		}
		x = ref
		ptr = join("/use/retries", name)
	}
	m, ok := v.object(ptr, x, "retry")
	if !ok {
		return nil
	}
	v.keys(ptr, m, "when", "exceptWhen", "delay", "backoff", "limit", "jitter")
	r := &retryPolicy{backoff: "constant", count: -1}
	if w, ok := m["when"]; ok {
		r.when = v.expr(ptr+"/when", w, scope)
	}
	if w, ok := m["exceptWhen"]; ok {
		r.exceptWhen = v.expr(ptr+"/exceptWhen", w, scope)
	}
	if d, ok := m["delay"]; ok {
		var err error
		if r.delay, err = parseDuration(d); err != nil {
			v.add(ptr+"/delay", "%s", err.Error())
		}
	}
	if b, ok := m["backoff"]; ok {
		if bm, ok := v.object(ptr+"/backoff", b, "backoff"); ok {
			v.keys(ptr+"/backoff", bm, "constant", "linear", "exponential")
			if len(bm) != 1 {
				v.add(ptr+"/backoff", "a backoff is one of constant, linear, exponential")
			}
			for k := range bm {
				r.backoff = k
			}
		}
	}
	if l, ok := m["limit"]; ok {
		lm, ok := v.object(ptr+"/limit", l, "limit")
		if ok {
			v.keys(ptr+"/limit", lm, "attempt", "duration")
			if a, ok := lm["attempt"]; ok {
				if am, ok := v.object(ptr+"/limit/attempt", a, "attempt"); ok {
					v.keys(ptr+"/limit/attempt", am, "count", "duration")
					if c, ok := am["count"]; ok {
						num, _ := c.(json.Number)
						n, err := strconv.Atoi(string(num))
						if err != nil || n < 0 {
							v.add(ptr+"/limit/attempt/count", "count must be a non-negative integer")
						}
						r.count = n
					}
					if d, ok := am["duration"]; ok {
						var err error
						if r.limit, err = parseDuration(d); err != nil {
							v.add(ptr+"/limit/attempt/duration", "%s", err.Error())
						}
					}
				}
			}
			if d, ok := lm["duration"]; ok {
				var err error
				if r.limit, err = parseDuration(d); err != nil {
					v.add(ptr+"/limit/duration", "%s", err.Error())
				}
			}
		}
	}
	return r
}
