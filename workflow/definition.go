package workflow

import (
	"bytes"
	"cmp"
	"container/heap"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v2"
)

// Definition is a workflow definition: named steps forming a DAG.
//
// One json-tagged struct serves both formats: YAML is converted to JSON before it
// is decoded.
type Definition struct {
	Name     string   `json:"name"`
	Revision int      `json:"revision,omitempty"` // set by the store, not the author
	Timeout  Duration `json:"timeout,omitempty"`  // whole-workflow timeout; 0 = none
	Steps    []Step   `json:"steps"`
}

// StepType says how a step runs.
type StepType string

// The step types.
const (
	StepTypeTask  StepType = "task"  // run by a handler, in process or on a remote worker
	StepTypeWait  StepType = "wait"  // completed from outside through the API
	StepTypeSleep StepType = "sleep" // a timer of Duration
	StepTypeHTTP  StepType = "http"  // one HTTP request
)

// StepTypes lists every step type.
var StepTypes = []StepType{StepTypeTask, StepTypeWait, StepTypeSleep, StepTypeHTTP}

// Valid reports whether t is one of the known step types.
func (t StepType) Valid() bool { return slices.Contains(StepTypes, t) }

// Step is one node of a definition's DAG. Which fields apply depends on Type;
// Validate rejects a field set on a step type that would ignore it.
type Step struct {
	ID        string          `json:"id"`
	Type      StepType        `json:"type"`
	Handler   string          `json:"handler,omitempty"` // task only, required there
	Input     json.RawMessage `json:"input,omitempty"`   // template tree (task; any JSON)
	Retry     *RetryPolicy    `json:"retry,omitempty"`   // task, http
	Timeout   Duration        `json:"timeout,omitempty"` // one attempt (task, http); 0 = none
	DependsOn []string        `json:"depends_on,omitempty"`
	Duration  Duration        `json:"duration,omitempty"` // sleep only, required there
	Request   *HTTPRequest    `json:"request,omitempty"`  // http only, required there
}

// RetryPolicy says how often and how fast a failed attempt is retried. A zero
// field means its default (see RetryPolicyOrDefault).
type RetryPolicy struct {
	MaxAttempts    int      `json:"max_attempts,omitempty"`
	InitialBackoff Duration `json:"initial_backoff,omitempty"`
	MaxBackoff     Duration `json:"max_backoff,omitempty"`
}

// HTTPRequest is the request of an http step. URL, header values and Body are
// templates (see CompileTemplate); Method and header names are not.
type HTTPRequest struct {
	Method  string            `json:"method"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    json.RawMessage   `json:"body,omitempty"`
}

// Retry defaults.
const (
	DefaultMaxAttempts    = 3
	DefaultInitialBackoff = time.Second
	DefaultMaxBackoff     = time.Minute
	// MaxRetryAttempts bounds retry.max_attempts.
	MaxRetryAttempts = 1000
)

// HTTPMethods lists the methods an http step may use.
var HTTPMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

// ErrInvalidDefinition is matched (errors.Is) by every *DefinitionError.
var ErrInvalidDefinition = errors.New("invalid definition")

// DefinitionError lists every problem found in a definition, each prefixed with
// its location, e.g. `steps[2] (notify): request.url: is required`.
type DefinitionError struct {
	Problems []string
}

func (e *DefinitionError) Error() string {
	return ErrInvalidDefinition.Error() + ": " + strings.Join(e.Problems, "; ")
}

// Is makes errors.Is(err, ErrInvalidDefinition) true.
func (e *DefinitionError) Is(target error) bool { return target == ErrInvalidDefinition }

// Duration is a time.Duration written in JSON and YAML as a Go duration string
// ("30s", "10m", "1h30m"). Decoding rejects numbers, unparsable strings and
// negative values.
type Duration time.Duration

// String formats d like time.Duration.String without trailing zero units:
// "1m" rather than "1m0s".
func (d Duration) String() string {
	s := time.Duration(d).String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON accepts a duration string; null leaves d unchanged.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if isNull(b) {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf(`want a duration string with a unit such as "30s", "10m" or "1h30m", not %s`, describeJSON(b))
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf(`invalid duration %q (want a Go duration such as "30s", "10m" or "1h30m")`, truncate(s))
	}
	if v < 0 {
		return fmt.Errorf("duration %q must not be negative", truncate(s))
	}
	*d = Duration(v)
	return nil
}

// ParseDefinition decodes a YAML or JSON definition and validates it. Unknown
// fields are errors. Every problem found is reported in one *DefinitionError
// (errors.Is(err, ErrInvalidDefinition)); a definition that decodes but is
// invalid is not returned.
//
// A document that is valid JSON is decoded as JSON directly; anything else is
// converted from YAML (see yamlToJSON: duplicate keys are errors, scalars follow
// YAML 1.2, numbers keep their text).
func ParseDefinition(data []byte) (*Definition, error) {
	return ParseDefinitionAs(data, "")
}

// ParseDefinitionAs is ParseDefinition for a definition stored under name
// (any name when it is empty): a definition that names itself otherwise is
// invalid, and that problem is listed with all the others.
func ParseDefinitionAs(data []byte, name string) (*Definition, error) {
	doc, err := definitionJSON(data)
	if err != nil {
		return nil, &DefinitionError{Problems: []string{err.Error()}}
	}
	var d Definition
	ps := &problemList{}
	if b := bytes.TrimSpace(doc); len(b) == 0 || b[0] != '{' {
		ps.block("", "a definition must be an object (a mapping with name and steps), not "+describeJSON(doc))
		return nil, ps.err(&d)
	}
	present := map[string]bool{}
	ps.decode(doc, reflect.ValueOf(&d).Elem(), "", present)
	d.checkExplicitRetryZeros(ps, present)
	d.validate(ps)
	if name != "" && d.Name != "" && d.Name != name {
		ps.add("name", fmt.Sprintf("the definition is named %q but was PUT to /v1/definitions/%s", d.Name, name))
	}
	if err := ps.err(&d); err != nil {
		return nil, err
	}
	return &d, nil
}

// definitionJSON returns data as JSON: unchanged if it already is JSON, else
// converted from YAML.
func definitionJSON(data []byte) ([]byte, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, errors.New("the definition is empty")
	}
	if json.Valid(trimmed) {
		return trimmed, nil
	}
	if line := secondDocument(data); line > 0 {
		// The converter would silently read the first document only.
		return nil, fmt.Errorf("syntax: line %d: a second YAML document starts here; a definition is one document", line)
	}
	j, err := yamlToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("syntax: %s", err.Error())
	}
	return j, nil
}

// yamlToJSON converts one YAML document to JSON, like sigs.k8s.io/yaml's
// YAMLToJSONStrict (duplicate keys are errors, object keys come out sorted) but
// with the scalars of YAML 1.2 rather than 1.1: only true/false (any case
// style) are booleans, so `country: NO` stays a string and a key `y:` stays "y"
// instead of becoming "true"; and a number keeps the text it was written with
// when that is valid JSON (9007199254740993 and 1.50 pass through exactly).
func yamlToJSON(data []byte) ([]byte, error) {
	var root *yamlValue
	if err := yaml.UnmarshalStrict(data, &root); err != nil {
		return nil, err
	}
	if root == nil {
		return []byte("null"), nil
	}
	return root.json, nil
}

// yamlValue is one YAML node converted to JSON. A null node never reaches
// UnmarshalYAML: the decoder leaves the pointer to it nil.
type yamlValue struct{ json []byte }

func (v *yamlValue) UnmarshalYAML(unmarshal func(any) error) error {
	// Probe the node's kind with targets that fail fast without decoding any
	// children. A child's own failure comes back as a plain error, never a
	// *yaml.TypeError, so a TypeError here always means "not this kind".
	var raw string
	if unmarshal(&raw) == nil { // a scalar; raw is its text as written
		var x any
		if err := unmarshal(&x); err != nil {
			return plainYAMLError(err)
		}
		j, err := yamlScalarJSON(x, raw)
		if err != nil {
			return err
		}
		v.json = j
		return nil
	}
	var seq []*yamlValue
	err := unmarshal(&seq)
	if err == nil {
		b := []byte{'['}
		for i, e := range seq {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, e.jsonOrNull()...)
		}
		v.json = append(b, ']')
		return nil
	}
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	// Keys decode into string as their text as written, so `y:` stays "y".
	var m map[string]*yamlValue
	if err := unmarshal(&m); err != nil {
		return plainYAMLError(err)
	}
	b := []byte{'{'}
	for i, k := range sortedKeys(m) {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, encodeString(k)...)
		b = append(b, ':')
		b = append(b, m[k].jsonOrNull()...)
	}
	v.json = append(b, '}')
	return nil
}

func (v *yamlValue) jsonOrNull() []byte {
	if v == nil {
		return []byte("null")
	}
	return v.json
}

// plainYAMLError turns a *yaml.TypeError into a plain error, so that the
// parent node does not take it for a failed probe.
func plainYAMLError(err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		return errors.New(strings.Join(te.Errors, "; "))
	}
	return err
}

// yamlScalarJSON converts a scalar: x is what YAML 1.1 resolved it to, raw the
// text it was written with.
func yamlScalarJSON(x any, raw string) ([]byte, error) {
	switch x := x.(type) {
	case nil:
		return []byte("null"), nil
	case string:
		return encodeString(x), nil
	case bool:
		switch raw {
		case "true", "True", "TRUE":
			return []byte("true"), nil
		case "false", "False", "FALSE":
			return []byte("false"), nil
		}
		return encodeString(raw), nil // yes, no, on, off, y, n: strings in YAML 1.2
	case int, int64, uint64, float64:
		if f, ok := x.(float64); ok && (math.IsInf(f, 0) || math.IsNaN(f)) {
			return nil, fmt.Errorf("%q has no JSON form", truncate(raw))
		}
		if raw != "" && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9') && json.Valid([]byte(raw)) {
			return []byte(raw), nil
		}
		return json.Marshal(x) // 0x1F, +1, .5, 1_000
	}
	return encodeString(raw), nil // anything else (a timestamp, …) as the text written
}

// secondDocument returns the line number of a "---" document marker that
// follows content, or 0. A marker is "---" at the start of a line, alone or
// followed by a space; inside a block scalar such a line would be indented.
func secondDocument(data []byte) int {
	content := false
	for n, line := range strings.Split(string(data), "\n") {
		line = strings.TrimRight(line, "\r")
		if line == "---" || strings.HasPrefix(line, "--- ") || strings.HasPrefix(line, "---\t") {
			if content {
				return n + 1
			}
			rest := strings.TrimSpace(strings.TrimPrefix(line, "---"))
			content = rest != "" && !strings.HasPrefix(rest, "#")
			continue
		}
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") && !strings.HasPrefix(line, "%") {
			content = true
		}
	}
	return 0
}

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
	} else if err := validateID("", d.Name, false); err != nil {
		ps.add("name", idProblem(err))
	}
	if d.Revision < 0 {
		ps.add("revision", "must not be negative")
	}
	if d.Timeout < 0 {
		ps.add("timeout", "must not be negative")
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
		if err := validateID("", s.ID, false); err != nil {
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
}

func (d *Definition) validateStep(ps *problemList, i int, index map[string]int) {
	s := &d.Steps[i]
	path := stepPath(i)
	switch {
	case s.Type == "":
		ps.add(path+".type", "is required (one of task, wait, sleep, http)")
	case !s.Type.Valid():
		ps.add(path+".type", fmt.Sprintf("unknown step type %q (want one of task, wait, sleep, http)", truncate(string(s.Type))))
	}

	// Fields that the step's type would ignore are rejected rather than dropped.
	// An unknown type skips these checks: its own problem says enough.
	if s.Type.Valid() {
		task, sleep, http := s.Type == StepTypeTask, s.Type == StepTypeSleep, s.Type == StepTypeHTTP
		if s.Handler != "" && !task {
			ps.add(path+".handler", "only task steps have a handler")
		}
		if len(s.Input) > 0 && !isNull(s.Input) && !task {
			ps.add(path+".input", "only task steps take an input")
		}
		if s.Retry != nil && !task && !http {
			ps.add(path+".retry", "only task and http steps are retried")
		}
		if s.Timeout != 0 && !task && !http {
			ps.add(path+".timeout", "only task and http steps have a per-attempt timeout")
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
		if s.Retry == nil {
			continue
		}
		path := stepPath(i) + ".retry"
		if present[path+".max_attempts"] && s.Retry.MaxAttempts == 0 {
			ps.add(path+".max_attempts", fmt.Sprintf("must be between 1 and %d (leave it out for the default, %d)", MaxRetryAttempts, DefaultMaxAttempts))
		}
		if present[path+".initial_backoff"] && s.Retry.InitialBackoff == 0 {
			ps.add(path+".initial_backoff", fmt.Sprintf("must be positive (leave it out for the default, %s)", Duration(DefaultInitialBackoff)))
		}
		if present[path+".max_backoff"] && s.Retry.MaxBackoff == 0 {
			ps.add(path+".max_backoff", fmt.Sprintf("must be positive (leave it out for the default, %s)", Duration(DefaultMaxBackoff)))
		}
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

// validateCycles reports one cycle per strongly connected component of the
// dependency graph (self-dependencies are reported per step).
func (d *Definition) validateCycles(ps *problemList, index map[string]int) {
	n := len(d.Steps)
	// next[i]: the steps that depend on step i, in definition order.
	next := make([][]int, n)
	for j, s := range d.Steps {
		if index[s.ID] != j || s.ID == "" {
			continue // invalid or duplicate id: already reported
		}
		for _, dep := range s.DependsOn {
			if i, ok := index[dep]; ok && i != j && !slices.Contains(next[i], j) {
				next[i] = append(next[i], j)
			}
		}
	}
	for _, comp := range stronglyConnected(next) {
		if len(comp) < 2 {
			continue
		}
		cycle := shortestCycle(next, comp)
		names := make([]string, len(cycle))
		for k, i := range cycle {
			names[k] = d.Steps[i].ID
		}
		ps.add("steps", "cycle: "+strings.Join(names, " → ")+" (each step depends on the one before it)")
	}
}

// stronglyConnected returns the strongly connected components of the graph
// (Tarjan), each sorted, ordered by their smallest member.
func stronglyConnected(next [][]int) [][]int {
	n := len(next)
	idx := make([]int, n)
	low := make([]int, n)
	on := make([]bool, n)
	for i := range idx {
		idx[i] = -1
	}
	var comps [][]int
	var st []int
	counter := 0
	var visit func(v int)
	visit = func(v int) {
		idx[v], low[v] = counter, counter
		counter++
		st = append(st, v)
		on[v] = true
		for _, w := range next[v] {
			if idx[w] < 0 {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if on[w] {
				low[v] = min(low[v], idx[w])
			}
		}
		if low[v] == idx[v] {
			var comp []int
			for {
				w := st[len(st)-1]
				st = st[:len(st)-1]
				on[w] = false
				comp = append(comp, w)
				if w == v {
					break
				}
			}
			slices.Sort(comp)
			comps = append(comps, comp)
		}
	}
	for v := range n {
		if idx[v] < 0 {
			visit(v)
		}
	}
	slices.SortFunc(comps, func(a, b []int) int { return a[0] - b[0] })
	return comps
}

// shortestCycle returns a shortest cycle through the first member of the
// strongly connected component comp, starting and ending with it.
func shortestCycle(next [][]int, comp []int) []int {
	start := comp[0]
	in := make(map[int]bool, len(comp))
	for _, v := range comp {
		in[v] = true
	}
	parent := map[int]int{start: -1}
	queue := []int{start}
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		for _, w := range next[v] {
			if w == start {
				var path []int
				for u := v; u != -1; u = parent[u] {
					path = append(path, u)
				}
				slices.Reverse(path)
				return append(path, start)
			}
			if _, seen := parent[w]; !seen && in[w] {
				parent[w] = v
				queue = append(queue, w)
			}
		}
	}
	return []int{start, start} // unreachable for a real component
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
			c := &compiler{stepIDs: hasStep, checkRef: checkRef}
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
		if (s.Type == StepTypeTask || !known) && len(bytes.TrimSpace(s.Input)) > 0 {
			compile(path+".input", s.Input, nil)
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
}

// ancestorSearch answers "is step v an ancestor of step i?" for one step i at
// a time. The depth-first walk over the dependencies is resumed only as far as
// each question needs, so a step using its direct dependencies does not walk
// the whole graph above it.
type ancestorSearch struct {
	deps  [][]int // deps[i]: the indexes of the known dependencies of step i
	seen  []int   // seen[v] == gen: v is a known ancestor of the current step
	gen   int
	stack []int
}

func (a *ancestorSearch) start(i int) {
	a.gen++
	a.stack = append(a.stack[:0], a.deps[i]...)
}

func (a *ancestorSearch) has(v int) bool {
	for a.seen[v] != a.gen && len(a.stack) > 0 {
		u := a.stack[len(a.stack)-1]
		a.stack = a.stack[:len(a.stack)-1]
		if a.seen[u] == a.gen {
			continue
		}
		a.seen[u] = a.gen
		a.stack = append(a.stack, a.deps[u]...)
	}
	return a.seen[v] == a.gen
}

// RetryPolicyOrDefault returns the step's retry policy with every unset field
// at its default: max_attempts 3, initial_backoff 1s, max_backoff 1m.
func (s Step) RetryPolicyOrDefault() RetryPolicy {
	if s.Retry == nil {
		return RetryPolicy{}.withDefaults()
	}
	return s.Retry.withDefaults()
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts == 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	if p.InitialBackoff == 0 {
		p.InitialBackoff = Duration(DefaultInitialBackoff)
	}
	if p.MaxBackoff == 0 {
		p.MaxBackoff = Duration(DefaultMaxBackoff)
	}
	return p
}

// Backoff returns how long to wait after failed attempt number attempt (from 1)
// before the next one. The base doubles from InitialBackoff (attempt 1) and is
// capped at MaxBackoff; "equal jitter" then returns base/2 plus a random part of
// up to base/2, so the result lies in [base/2, base]. rnd returns a number in
// [0, 1) and makes the result deterministic; nil uses math/rand/v2. Unset
// fields take their defaults.
func (p RetryPolicy) Backoff(attempt int, rnd func() float64) time.Duration {
	p = p.withDefaults()
	base, limit := time.Duration(p.InitialBackoff), time.Duration(p.MaxBackoff)
	if base <= 0 || limit <= 0 {
		return 0
	}
	for i := 1; i < attempt && base < limit; i++ {
		if base > limit/2 {
			base = limit
			break
		}
		base *= 2
	}
	base = min(base, limit)
	if rnd == nil {
		rnd = rand.Float64
	}
	f := rnd()
	if !(f >= 0) { // also catches NaN
		f = 0
	}
	f = min(f, 1)
	half := base / 2
	return half + time.Duration(f*float64(base-half))
}

// Step returns the step with the given id.
func (d *Definition) Step(id string) (*Step, bool) {
	for i := range d.Steps {
		if d.Steps[i].ID == id {
			return &d.Steps[i], true
		}
	}
	return nil, false
}

// HasStep reports whether d has a step with the given id; it fits the stepIDs
// argument of CompileTemplate.
func (d *Definition) HasStep(id string) bool {
	_, ok := d.Step(id)
	return ok
}

// Roots returns the ids of the steps without dependencies, in definition order.
func (d *Definition) Roots() []string {
	var ids []string
	for _, s := range d.Steps {
		if len(s.DependsOn) == 0 {
			ids = append(ids, s.ID)
		}
	}
	return ids
}

// Ready returns, in definition order, the ids of the steps that are PENDING in
// steps and whose dependencies are all COMPLETED there. A step missing from
// steps is neither ready nor completed.
func (d *Definition) Ready(steps map[string]*StepState) []string {
	var ids []string
	for _, s := range d.Steps {
		if st := steps[s.ID]; st == nil || st.Status != StepPending {
			continue
		}
		ready := true
		for _, dep := range s.DependsOn {
			if st := steps[dep]; st == nil || st.Status != StepCompleted {
				ready = false
				break
			}
		}
		if ready {
			ids = append(ids, s.ID)
		}
	}
	return ids
}

// Dependents returns the ids of the steps that depend directly on id, in
// definition order.
func (d *Definition) Dependents(id string) []string {
	var ids []string
	for _, s := range d.Steps {
		if slices.Contains(s.DependsOn, id) {
			ids = append(ids, s.ID)
		}
	}
	return ids
}

// TopoOrder returns every step id such that each step comes after all its
// dependencies; among the steps that could come next, the earliest defined
// wins, so the order is stable. Steps on a cycle or depending on an unknown
// step (both rejected by Validate) are left out.
func (d *Definition) TopoOrder() []string {
	n := len(d.Steps)
	index := make(map[string]int, n)
	for i, s := range d.Steps {
		if _, dup := index[s.ID]; !dup {
			index[s.ID] = i
		}
	}
	waiting := make([]int, n) // unmet dependencies of each step
	next := make([][]int, n)  // the steps that depend on each step
	for j, s := range d.Steps {
		for _, dep := range s.DependsOn {
			i, ok := index[dep]
			if !ok || index[s.ID] != j {
				waiting[j] = -1 // never ready: an unknown dependency or a duplicate id
				break
			}
			waiting[j]++
			next[i] = append(next[i], j)
		}
	}
	// ready is a min-heap of step indexes: the earliest defined comes first.
	ready := &intHeap{}
	for j := range n {
		if waiting[j] == 0 && index[d.Steps[j].ID] == j {
			heap.Push(ready, j)
		}
	}
	order := make([]string, 0, n)
	for ready.Len() > 0 {
		i := heap.Pop(ready).(int)
		order = append(order, d.Steps[i].ID)
		for _, j := range next[i] {
			if waiting[j] > 0 {
				if waiting[j]--; waiting[j] == 0 {
					heap.Push(ready, j)
				}
			}
		}
	}
	return order
}

type intHeap []int

func (h intHeap) Len() int           { return len(h) }
func (h intHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h intHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *intHeap) Push(x any)        { *h = append(*h, x.(int)) }
func (h *intHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Ancestors returns the ids of every step that id depends on, directly or
// transitively. It contains id itself only if id is on a cycle.
func (d *Definition) Ancestors(id string) map[string]bool {
	deps := make(map[string][]string, len(d.Steps))
	for _, s := range d.Steps {
		if _, dup := deps[s.ID]; !dup {
			deps[s.ID] = s.DependsOn
		}
	}
	seen := map[string]bool{}
	stack := slices.Clone(deps[id])
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[v] {
			continue
		}
		seen[v] = true
		stack = append(stack, deps[v]...)
	}
	return seen
}

// InitialState returns the state of a new instance of d: every step PENDING
// with 0 attempts. The engine then starts the roots.
func (d *Definition) InitialState() State {
	st := State{
		Variables: map[string]json.RawMessage{},
		Steps:     make(map[string]*StepState, len(d.Steps)),
	}
	for _, s := range d.Steps {
		st.Steps[s.ID] = &StepState{Status: StepPending}
	}
	return st
}

// Canonical returns stable JSON for d, for storing it and for telling whether a
// definition is the same as the latest revision: Revision is left out, object
// keys inside input and body are sorted, numbers keep their exact text, an empty
// retry block is dropped, and durations are written in their shortest form. The
// same definition gives the same bytes whether it was written in YAML or JSON.
func (d *Definition) Canonical() ([]byte, error) {
	c := *d
	c.Revision = 0
	c.Steps = make([]Step, len(d.Steps))
	for i, s := range d.Steps {
		var err error
		if s.Input, err = canonicalJSON(s.Input); err != nil {
			return nil, fmt.Errorf("steps[%d].input: %w", i, err)
		}
		if s.Retry != nil && *s.Retry == (RetryPolicy{}) {
			s.Retry = nil
		}
		if s.Request != nil {
			r := *s.Request
			if r.Body, err = canonicalJSON(r.Body); err != nil {
				return nil, fmt.Errorf("steps[%d].request.body: %w", i, err)
			}
			if len(r.Headers) == 0 {
				r.Headers = nil
			}
			s.Request = &r
		}
		if len(s.DependsOn) == 0 {
			s.DependsOn = nil
		}
		c.Steps[i] = s
	}
	return marshalNoEscape(c)
}

// canonicalJSON re-encodes raw with sorted object keys and exact numbers; JSON
// null and empty input become nil.
func canonicalJSON(raw json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 || isNull(raw) {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data after the JSON value")
	}
	return marshalNoEscape(v)
}

// marshalNoEscape is json.Marshal without HTML escaping, so "&" in a URL stays
// readable in stored definitions.
func marshalNoEscape(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
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
			if i, err := strconv.Atoi(n); err == nil && i < len(d.Steps) && validateID("", d.Steps[i].ID, false) == nil {
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

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// decode decodes raw into v field by field, so that one bad field does not hide
// the others: every unknown or duplicate key and every value of the wrong type
// is recorded with its path. Keys must match the json tags exactly (encoding/json
// would also accept "Name" for "name"). present receives the path of every key
// found. JSON null leaves the zero value, like an absent key.
func (p *problemList) decode(raw json.RawMessage, v reflect.Value, path string, present map[string]bool) {
	if isNull(raw) {
		return
	}
	if reflect.PointerTo(v.Type()).Implements(unmarshalerType) {
		if err := json.Unmarshal(raw, v.Addr().Interface()); err != nil {
			p.block(path, decodeProblem(err, v.Type(), raw))
		}
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		nv := reflect.New(v.Type().Elem())
		p.decode(raw, nv.Elem(), path, present)
		v.Set(nv)
	case reflect.Struct:
		members, err := objectMembers(raw)
		if err != nil {
			p.block(path, "must be an object, not "+describeJSON(raw))
			return
		}
		fields, names := jsonFields(v.Type())
		seen := make(map[string]bool, len(members))
		for _, m := range members {
			if seen[m.key] {
				p.note(path, fmt.Sprintf("duplicate field %q", truncate(m.key)))
				continue
			}
			seen[m.key] = true
			i, ok := fields[m.key]
			if !ok {
				p.note(path, unknownField(m.key, names))
				continue
			}
			fp := joinPath(path, m.key)
			present[fp] = true
			p.decode(m.value, v.Field(i), fp, present)
		}
	case reflect.Slice:
		var elems []json.RawMessage
		if err := json.Unmarshal(raw, &elems); err != nil {
			p.block(path, "must be a list, not "+describeJSON(raw))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(elems), len(elems))
		for i, e := range elems {
			p.decode(e, s.Index(i), path+"["+strconv.Itoa(i)+"]", present)
		}
		v.Set(s)
	case reflect.Map:
		members, err := objectMembers(raw)
		if err != nil {
			p.block(path, "must be an object, not "+describeJSON(raw))
			return
		}
		m := reflect.MakeMapWithSize(v.Type(), len(members))
		for _, mem := range members {
			key := reflect.ValueOf(mem.key).Convert(v.Type().Key())
			if m.MapIndex(key).IsValid() {
				p.note(path, fmt.Sprintf("duplicate key %q", truncate(mem.key)))
				continue
			}
			ev := reflect.New(v.Type().Elem()).Elem()
			p.decode(mem.value, ev, path+keyPath(mem.key), present)
			m.SetMapIndex(key, ev)
		}
		v.Set(m)
	default:
		if err := json.Unmarshal(raw, v.Addr().Interface()); err != nil {
			p.block(path, decodeProblem(err, v.Type(), raw))
		}
	}
}

func decodeProblem(err error, t reflect.Type, raw json.RawMessage) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return "must be " + describeType(t) + ", not " + describeJSON(raw)
	}
	return err.Error()
}

func describeType(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Bool:
		return "true or false"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return t.String()
}

// describeJSON names what a JSON value is, for error messages: numbers and
// booleans are shown (YAML turns an unquoted yes into true), the rest by kind.
func describeJSON(raw []byte) string {
	b := bytes.TrimSpace(raw)
	if len(b) == 0 {
		return "nothing"
	}
	switch b[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "a list"
	case 'n':
		return "null"
	}
	return truncate(string(b))
}

// jsonFields maps the json names of t's fields to their index.
func jsonFields(t reflect.Type) (map[string]int, []string) {
	fields := make(map[string]int, t.NumField())
	var names []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		fields[name] = i
		names = append(names, name)
	}
	return fields, names
}

func unknownField(key string, names []string) string {
	best, bestDist := "", 3
	for _, n := range names {
		if d := editDistance(strings.ToLower(key), n); d < bestDist {
			best, bestDist = n, d
		}
	}
	if best != "" {
		return fmt.Sprintf("unknown field %q (did you mean %q?)", truncate(key), best)
	}
	return fmt.Sprintf("unknown field %q (known: %s)", truncate(key), strings.Join(names, ", "))
}

// editDistance is the Levenshtein distance, for "did you mean" hints.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

type member struct {
	key   string
	value json.RawMessage
}

// objectMembers returns the members of a JSON object in document order,
// duplicates included.
func objectMembers(raw json.RawMessage) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	var ms []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		ms = append(ms, member{key, v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	return ms, nil
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
