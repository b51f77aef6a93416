// Validating a definition: every rule a definition must meet, each problem
// reported with its path in one *DefinitionError.

package workflow

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/flowd/flowd/workflow/instance"
)

// Validate checks d against every rule of a definition and returns a
// *DefinitionError listing all problems, or nil.
func (d *Definition) Validate() error {
	ps := &problemList{}
	d.validate(ps)
	return ps.err(d)
}

func (d *Definition) validate(ps *problemList) {
	if d.Name == "" {
		ps.add("name", "is required")
	} else if err := instance.ValidateName(d.Name); err != nil {
		ps.add("name", idProblem(err))
	}
	if d.Revision < 0 {
		ps.add("revision", "must not be negative")
	}
	if d.Timeout < 0 {
		ps.add("timeout", "must not be negative")
	}
	validatePriority(ps, d.Priority)
	d.validateSearch(ps)
	if d.Code != nil || d.Retry != nil {
		d.validateCode(ps)
		return
	}
	if len(d.Steps) == 0 {
		ps.add("steps", "at least one step is required")
		return
	}

	// index maps each id to its first occurrence.
	index := make(map[string]int, len(d.Steps))
	for i, s := range d.Steps {
		path := stepPath(i)
		if s.ID == "" {
			ps.add(path+".id", "is required")
			continue
		}
		if err := instance.ValidateName(s.ID); err != nil {
			ps.add(path+".id", idProblem(err))
			continue
		}
		if first, dup := index[s.ID]; dup {
			ps.add(path+".id", fmt.Sprintf("duplicate step id %q (also steps[%d])", s.ID, first))
			continue
		}
		index[s.ID] = i
	}
	for i := range d.Steps {
		d.validateStep(ps, i, index)
	}
	d.validateCycles(ps, index)
	d.validateTemplates(ps, index)
	d.validateConcurrency(ps)
}

// validateCode checks a code definition: a handler and no steps; retry
// (of its runs) belongs to code definitions only.
func (d *Definition) validateCode(ps *problemList) {
	if d.Code == nil {
		ps.add("retry", "only a code definition has a retry of its own (a step's retry goes on the step)")
		return
	}
	if len(d.Steps) > 0 {
		ps.add("steps", "a code definition has no steps: its code records them as it runs")
	}
	if len(d.Output) > 0 {
		ps.add("output", "a code definition's output is what its function returns")
	}
	switch {
	case d.Code.Handler == "":
		ps.add("code.handler", "is required: the name a worker serves the function under")
	case strings.HasPrefix(d.Code.Handler, "flowd:"):
		ps.add("code.handler", fmt.Sprintf("%q is in flowd's own namespace (\"flowd:\"), which no worker serves", truncate(d.Code.Handler)))
	default:
		if msg := handlerProblem(d.Code.Handler); msg != "" {
			ps.add("code.handler", msg)
		}
	}
	if d.Retry != nil {
		validateRetry(ps, "retry", *d.Retry)
	}
	d.validateConcurrency(ps)
}

func (d *Definition) validateStep(ps *problemList, i int, index map[string]int) {
	s := &d.Steps[i]
	path := stepPath(i)
	switch {
	case s.Type == "":
		ps.add(path+".type", "is required (one of "+stepTypeList()+")")
	case !s.Type.Valid():
		ps.add(path+".type", fmt.Sprintf("unknown step type %q (want one of %s)", truncate(string(s.Type)), stepTypeList()))
	}

	// Fields that the step's type would ignore are rejected rather than dropped.
	// An unknown type skips these checks: its own problem says enough.
	if s.Type.Valid() {
		task, sleep, http := s.Type == StepTypeTask, s.Type == StepTypeSleep, s.Type == StepTypeHTTP
		wait, child := s.Type == StepTypeWait, s.Type == StepTypeWorkflow
		if s.Handler != "" && !task {
			ps.add(path+".handler", "only task steps have a handler")
		}
		if len(s.Input) > 0 && !isNull(s.Input) && !task && !child {
			ps.add(path+".input", "only task and workflow steps take an input")
		}
		if s.Retry != nil && !task && !http && !child {
			ps.add(path+".retry", "only task, http and workflow steps are retried")
		}
		if s.Timeout != 0 && !task && !http && !child {
			ps.add(path+".timeout", "only task, http and workflow steps have a per-attempt timeout")
		}
		if s.Foreach != "" && !task && !http && !child {
			ps.add(path+".foreach", "only task, http and workflow steps run for each item")
		}
		if s.Event != "" && !wait {
			ps.add(path+".event", "only wait steps wait for an event")
		}
		if s.Definition != "" && !child {
			ps.add(path+".definition", "only workflow steps start a child workflow")
		}
		if child {
			if s.Definition == "" {
				ps.add(path+".definition", "is required for a workflow step (the name of the child's definition)")
			} else if err := instance.ValidateName(s.Definition); err != nil {
				ps.add(path+".definition", idProblem(err))
			}
		}
		if s.Duration != 0 && !sleep {
			ps.add(path+".duration", "only sleep steps have a duration")
		}
		if s.Request != nil && !http {
			ps.add(path+".request", "only http steps have a request")
		}
		if task {
			if s.Handler == "" {
				ps.add(path+".handler", "is required for a task step")
			} else if msg := handlerProblem(s.Handler); msg != "" {
				ps.add(path+".handler", msg)
			}
		}
		if sleep && s.Duration == 0 {
			ps.add(path+".duration", "is required for a sleep step and must be positive")
		}
		if http {
			validateRequest(ps, path+".request", s.Request)
		}
	}
	if s.Timeout < 0 {
		ps.add(path+".timeout", "must not be negative")
	}
	if s.Duration < 0 {
		ps.add(path+".duration", "must not be negative")
	}
	if s.Retry != nil {
		validateRetry(ps, path+".retry", *s.Retry)
	}
	validateControlFlow(ps, path, s)
	validateStepFlowControl(ps, path, s)

	listed := make(map[string]bool, len(s.DependsOn))
	for j, dep := range s.DependsOn {
		dp := fmt.Sprintf("%s.depends_on[%d]", path, j)
		_, known := index[dep]
		switch {
		case dep != "" && dep == s.ID:
			ps.add(dp, "a step cannot depend on itself")
		case listed[dep]:
			ps.add(dp, fmt.Sprintf("%q is listed twice", truncate(dep)))
		case !known:
			ps.add(dp, fmt.Sprintf("unknown step %q", truncate(dep)))
		}
		listed[dep] = true
	}
}

func validateRetry(ps *problemList, path string, p RetryPolicy) {
	if p.MaxAttempts < 0 || p.MaxAttempts > MaxRetryAttempts {
		ps.add(path+".max_attempts", fmt.Sprintf("must be between 1 and %d", MaxRetryAttempts))
	}
	if p.InitialBackoff < 0 {
		ps.add(path+".initial_backoff", "must not be negative")
	}
	if p.MaxBackoff < 0 {
		ps.add(path+".max_backoff", "must not be negative")
	}
	if p.InitialBackoff < 0 || p.MaxBackoff < 0 {
		return
	}
	eff := p.withDefaults()
	if eff.InitialBackoff > eff.MaxBackoff {
		maxNote := ""
		if p.MaxBackoff == 0 {
			maxNote = " (the default)"
		}
		ps.add(path, fmt.Sprintf("initial_backoff %s exceeds max_backoff %s%s", eff.InitialBackoff, eff.MaxBackoff, maxNote))
	}
}

// checkExplicitRetryZeros rejects a retry field written as zero: zero means "use
// the default", so `max_attempts: 0` or `initial_backoff: 0s` would silently
// become 3 or 1s.
func (d *Definition) checkExplicitRetryZeros(ps *problemList, present map[string]bool) {
	for i, s := range d.Steps {
		checkRetryZeros(ps, present, stepPath(i)+".retry", s.Retry)
	}
	checkRetryZeros(ps, present, "retry", d.Retry)
}

func checkRetryZeros(ps *problemList, present map[string]bool, path string, r *RetryPolicy) {
	if r == nil {
		return
	}
	if present[path+".max_attempts"] && r.MaxAttempts == 0 {
		ps.add(path+".max_attempts", fmt.Sprintf("must be between 1 and %d (leave it out for the default, %d)", MaxRetryAttempts, DefaultMaxAttempts))
	}
	if present[path+".initial_backoff"] && r.InitialBackoff == 0 {
		ps.add(path+".initial_backoff", fmt.Sprintf("must be positive (leave it out for the default, %s)", Duration(DefaultInitialBackoff)))
	}
	if present[path+".max_backoff"] && r.MaxBackoff == 0 {
		ps.add(path+".max_backoff", fmt.Sprintf("must be positive (leave it out for the default, %s)", Duration(DefaultMaxBackoff)))
	}
}

func validateRequest(ps *problemList, path string, r *HTTPRequest) {
	if r == nil {
		ps.add(path, "is required for an http step")
		return
	}
	switch {
	case r.Method == "":
		ps.add(path+".method", "is required (one of "+strings.Join(HTTPMethods, ", ")+")")
	case !slices.Contains(HTTPMethods, r.Method):
		ps.add(path+".method", fmt.Sprintf("unknown method %q (want one of %s)", truncate(r.Method), strings.Join(HTTPMethods, ", ")))
	}
	// The URL itself is checked here when it has no references; a rendered URL
	// must be checked again by whoever sends the request.
	if r.URL == "" {
		ps.add(path+".url", "is required")
	} else if !strings.Contains(r.URL, "{{") {
		if msg := urlProblem(r.URL); msg != "" {
			ps.add(path+".url", msg)
		}
	} else if prefix, _, _ := strings.Cut(r.URL, "{{"); strings.Contains(prefix, "://") {
		scheme, _, _ := strings.Cut(prefix, "://")
		if s := strings.ToLower(scheme); s != "http" && s != "https" {
			ps.add(path+".url", fmt.Sprintf("scheme %q is not http or https", truncate(scheme)))
		}
	}
	for _, name := range sortedKeys(r.Headers) {
		if !isToken(name) {
			ps.add(path+".headers"+keyPath(name), "is not a valid header name")
		}
		if strings.ContainsAny(r.Headers[name], "\r\n\x00") {
			ps.add(path+".headers"+keyPath(name), "must not contain CR, LF or NUL")
		}
	}
	seen := map[string]string{}
	for _, name := range sortedKeys(r.Headers) {
		c := strings.ToLower(name)
		if other, dup := seen[c]; dup {
			ps.add(path+".headers"+keyPath(name), fmt.Sprintf("duplicates header %q (header names are case-insensitive)", other))
		}
		seen[c] = name
	}
}

func urlProblem(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Sprintf("invalid URL: %v", errors.Unwrap(err))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Sprintf("URL %q must start with http:// or https://", truncate(raw))
	}
	if u.Host == "" {
		return fmt.Sprintf("URL %q has no host", truncate(raw))
	}
	return ""
}

// isToken reports whether s is an RFC 9110 token (a valid header name).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

// HandlerNameProblem says what is wrong with h as a handler name, or "" when
// nothing is: the rule that definitions and workers share.
func HandlerNameProblem(h string) string { return handlerProblem(h) }

// handlerProblem checks a handler name. Handler names have no charset of their own, so only
// what would break a worker's handler list is refused.
func handlerProblem(h string) string {
	if len(h) > MaxIDLength {
		return fmt.Sprintf("is %d characters long, at most %d are allowed", len(h), MaxIDLength)
	}
	for i, r := range h {
		if r <= ' ' || r == 0x7f {
			return fmt.Sprintf("%q has a space or control character at offset %d", truncate(h), i)
		}
	}
	return ""
}

// validateTemplates compiles every template of every step and checks that each
// step reference names an ancestor of the step using it. Every problem is
// reported, in template order: a bad reference never hides the next one, in
// the same string or elsewhere.
func (d *Definition) validateTemplates(ps *problemList, index map[string]int) {
	hasStep := func(id string) bool { _, ok := index[id]; return ok }
	anc := &ancestorSearch{deps: make([][]int, len(d.Steps)), seen: make([]int, len(d.Steps))}
	for i, s := range d.Steps {
		for _, dep := range s.DependsOn {
			if j, ok := index[dep]; ok {
				anc.deps[i] = append(anc.deps[i], j)
			}
		}
	}
	for i := range d.Steps {
		s := &d.Steps[i]
		path := stepPath(i)
		// A step whose depends_on could not be read has no known ancestors:
		// "not an ancestor" would only repeat that problem.
		checkAncestry := !ps.blocked[path+".depends_on"]
		anc.start(i)
		checkRef := func(r Reference) string {
			switch {
			case r.Step == "" || !checkAncestry:
				return ""
			case r.Step == s.ID:
				return fmt.Sprintf("%s: a step cannot use its own output", r)
			case !anc.has(index[r.Step]):
				return fmt.Sprintf("%s: step %q is not an ancestor of %q (add it to depends_on, directly or through another step)", r, r.Step, s.ID)
			}
			return ""
		}
		compile := func(where string, tree json.RawMessage, text *string) {
			c := &compiler{stepIDs: hasStep, checkRef: checkRef, iteration: s.Foreach != ""}
			var err error
			if text != nil {
				_, err = c.template(c.str(*text, ""))
			} else {
				_, err = c.compile(tree)
			}
			var te *TemplateError
			switch {
			case errors.As(err, &te):
				for _, p := range te.Problems {
					ps.add(where+p.Path, p.Message)
				}
			case err != nil:
				ps.add(where, err.Error())
			}
		}
		// A step of an unknown type has its templates checked too: whichever
		// type the author meant, their problems are still there.
		known := s.Type.Valid()
		if (s.Type == StepTypeTask || s.Type == StepTypeWorkflow || !known) && len(bytes.TrimSpace(s.Input)) > 0 {
			compile(path+".input", s.Input, nil)
		}
		if s.Key != "" {
			compile(path+".key", nil, &s.Key)
		}
		for _, k := range flowControlKeys(s) {
			compile(path+k.path, nil, k.template)
		}
		if r := s.Request; r != nil && (s.Type == StepTypeHTTP || !known) {
			if r.URL != "" {
				compile(path+".request.url", nil, &r.URL)
			}
			for _, name := range sortedKeys(r.Headers) {
				v := r.Headers[name]
				compile(path+".request.headers"+keyPath(name), nil, &v)
			}
			if len(bytes.TrimSpace(r.Body)) > 0 {
				compile(path+".request.body", r.Body, nil)
			}
		}
	}
	if len(bytes.TrimSpace(d.Output)) > 0 && !isNull(d.Output) {
		// The output is rendered once every step has finished: any step may
		// be referenced.
		c := &compiler{stepIDs: hasStep, checkRef: func(Reference) string { return "" }}
		var te *TemplateError
		if _, err := c.compile(d.Output); errors.As(err, &te) {
			for _, p := range te.Problems {
				ps.add("output"+p.Path, p.Message)
			}
		} else if err != nil {
			ps.add("output", err.Error())
		}
	}
}

// validateControlFlow checks a step's control flow: its expressions
// compile, its join is known and has dependencies to join, a concurrency
// bound comes with a foreach, an event name is valid and a key comes with
// an event.
func validateControlFlow(ps *problemList, path string, s *Step) {
	if s.When != "" {
		if _, err := CompileExpr(s.When); err != nil {
			ps.add(path+".when", err.Error())
		}
	}
	if s.Foreach != "" {
		if _, err := CompileExpr(s.Foreach); err != nil {
			ps.add(path+".foreach", err.Error())
		}
	}
	switch {
	case s.Join != "" && !slices.Contains(Joins, s.Join):
		ps.add(path+".join", fmt.Sprintf("unknown join %q (want one of all, any, first)", truncate(string(s.Join))))
	case s.Join != "" && len(s.DependsOn) == 0:
		ps.add(path+".join", "only a step with depends_on joins its dependencies")
	}
	switch {
	case s.MaxConcurrency < 0:
		ps.add(path+".max_concurrency", "must not be negative")
	case s.MaxConcurrency > 0 && s.Foreach == "":
		ps.add(path+".max_concurrency", "only a step with foreach bounds its iterations")
	}
	if s.Event != "" {
		if msg := EventNameProblem(s.Event); msg != "" {
			ps.add(path+".event", msg)
		}
	}
	if s.Key != "" && s.Event == "" {
		ps.add(path+".key", "only a wait step with an event has a key")
	}
}

func stepTypeList() string {
	names := make([]string, len(StepTypes))
	for i, t := range StepTypes {
		names[i] = string(t)
	}
	return strings.Join(names, ", ")
}

// problem is one definition problem; path is the JSON path of the field
// ("steps[2].request.url").
type problem struct{ path, msg string }

type problemList struct {
	list    []problem
	blocked map[string]bool // paths of the blocking problems
}

// add records a validation problem unless a decoding problem at path, or at an
// enclosing path, already explains it.
func (p *problemList) add(path, msg string) {
	if len(p.blocked) > 0 {
		if p.blocked[path] || p.blocked[""] {
			return
		}
		for i := 0; i < len(path); i++ {
			if (path[i] == '.' || path[i] == '[') && p.blocked[path[:i]] {
				return
			}
		}
	}
	p.list = append(p.list, problem{path: path, msg: msg})
}

// block records a decoding problem.
func (p *problemList) block(path, msg string) {
	if p.blocked == nil {
		p.blocked = map[string]bool{}
	}
	p.blocked[path] = true
	p.list = append(p.list, problem{path: path, msg: msg})
}

// note records a decoding problem that does not hide validation problems.
func (p *problemList) note(path, msg string) {
	p.list = append(p.list, problem{path: path, msg: msg})
}

func (p *problemList) err(d *Definition) error {
	if len(p.list) == 0 {
		return nil
	}
	// Group the problems by step, in definition order: definition-level fields
	// first, then each step, then the problems of the whole graph (cycles).
	list := slices.Clone(p.list)
	slices.SortStableFunc(list, func(a, b problem) int { return cmp.Compare(a.group(), b.group()) })
	e := &DefinitionError{Problems: make([]string, len(list))}
	for i, q := range list {
		e.Problems[i] = q.format(d)
	}
	return e
}

func (q problem) group() int {
	if q.path == "steps" {
		return math.MaxInt
	}
	if rest, ok := strings.CutPrefix(q.path, "steps["); ok {
		if n, _, ok := strings.Cut(rest, "]"); ok {
			if i, err := strconv.Atoi(n); err == nil {
				return i
			}
		}
	}
	return -1
}

// format writes the location, naming the step by its id when it has a valid
// one: `steps[2] (notify): request.url: is required`.
func (q problem) format(d *Definition) string {
	if q.path == "" {
		return q.msg
	}
	if rest, ok := strings.CutPrefix(q.path, "steps["); ok {
		if n, after, ok := strings.Cut(rest, "]"); ok {
			loc := "steps[" + n + "]"
			if i, err := strconv.Atoi(n); err == nil && i < len(d.Steps) && instance.ValidateName(d.Steps[i].ID) == nil {
				loc += " (" + d.Steps[i].ID + ")"
			}
			if after = strings.TrimPrefix(after, "."); after != "" {
				return loc + ": " + after + ": " + q.msg
			}
			return loc + ": " + q.msg
		}
	}
	return q.path + ": " + q.msg
}

func stepPath(i int) string { return "steps[" + strconv.Itoa(i) + "]" }

func idProblem(err error) string {
	return strings.TrimSpace(strings.TrimPrefix(err.Error(), ErrInvalidID.Error()+":"))
}

func joinPath(path, key string) string {
	if path == "" && isKey(key) {
		return key
	}
	return path + keyPath(key)
}

// keyPath writes one object key of a path: ".sku" for a plain key, `["a b"]`
// for anything else.
func keyPath(key string) string {
	if isKey(key) {
		return "." + key
	}
	return "[" + strconv.Quote(truncate(key)) + "]"
}

// isKey reports whether s is a template key: one or more of [A-Za-z0-9_-].
func isKey(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isKeyByte(s[i]) {
			return false
		}
	}
	return true
}

func isKeyByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}
