package workflow

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Definition is a workflow definition: named steps forming a DAG.
//
// One json-tagged struct serves both formats: YAML is converted to JSON before it
// is decoded.
type Definition struct {
	Name     string   `json:"name"`
	Revision int      `json:"revision,omitempty"` // set by the store, not the author
	Timeout  Duration `json:"timeout,omitempty"`  // whole-workflow timeout; 0 = none
	// Retention, when set, replaces the server's retention for the
	// instances of this definition: a finished instance is deleted once
	// it has not changed for that long. 0 keeps them for ever, whatever
	// the server's retention; nil (absent) follows the server's.
	Retention *Duration `json:"retention,omitempty"`
	Steps     []Step    `json:"steps,omitempty"`
	// Code, when set, makes the definition a workflow written as code: a
	// function a worker serves under Code.Handler, whose steps it records
	// as it runs (a code definition has no Steps). Retry then governs the
	// runs of the function that fail.
	Code  *Code        `json:"code,omitempty"`
	Retry *RetryPolicy `json:"retry,omitempty"`
	// Output, when set, is the template (any JSON, templates as in a step's
	// input) rendered into the instance's output when it completes.
	// Without it the output maps each COMPLETED step that no other step
	// depends on to its output.
	Output json.RawMessage `json:"output,omitempty"`
	// Concurrency, when set, bounds how many instances of the definition
	// with the same rendered key hold a slot (RUNNING or PAUSED) at once.
	Concurrency *Concurrency `json:"concurrency,omitempty"`
	// Priority (1–5, nil: DefaultPriority) orders the claims of the
	// instances' tasks: higher first. A start may override it.
	Priority *int `json:"priority,omitempty"`
	// Search, when set, are the search attributes each instance gets when
	// it is created: name → a template rendered from the start's input
	// (templates as in a step's input; .input only) to a string, a
	// number or a boolean, or such a value itself.
	Search map[string]json.RawMessage `json:"search,omitempty"`
	// Serverless, when set, is a Serverless Workflow document (canonical
	// JSON) that the definition is written in instead of steps: it is what
	// is stored and shown (MarshalJSON), and the engine runs it on its
	// interpreter. Name and Timeout are taken from it.
	Serverless json.RawMessage `json:"-"`
}

// MarshalJSON writes a Serverless Workflow definition as its document, any
// other as its fields.
func (d Definition) MarshalJSON() ([]byte, error) {
	if d.Serverless != nil {
		return d.Serverless, nil
	}
	type fields Definition // without this method
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // as the caller's encoder asks: it escapes again if it must
	if err := enc.Encode(fields(d)); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// Code names the function a code definition runs: the handler a worker
// serves it under.
type Code struct {
	Handler string `json:"handler"`
}

// RunRetryPolicy is the retry policy of a code definition's runs, with
// every unset field defaulted.
func (d *Definition) RunRetryPolicy() RetryPolicy {
	if d.Retry == nil {
		return RetryPolicy{}.withDefaults()
	}
	return d.Retry.withDefaults()
}

// StepType says how a step runs.
type StepType string

// The step types.
const (
	StepTypeTask  StepType = "task"  // run by a handler, in process or on a remote worker
	StepTypeWait  StepType = "wait"  // completed from outside through the API
	StepTypeSleep StepType = "sleep" // a timer of Duration
	StepTypeHTTP  StepType = "http"  // one HTTP request
	// StepTypeWorkflow runs a child instance of another definition.
	StepTypeWorkflow StepType = "workflow"
)

// StepTypes lists every step type.
var StepTypes = []StepType{StepTypeTask, StepTypeWait, StepTypeSleep, StepTypeHTTP, StepTypeWorkflow}

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

	// When is a jq program evaluated once, when the step would otherwise
	// become ready: not truthy → the step is SKIPPED.
	When string `json:"when,omitempty"`
	// Join says when a step with dependencies is ready: JoinAll (""),
	// JoinAny or JoinFirst.
	Join Join `json:"join,omitempty"`
	// Foreach is a jq program giving the array the step runs once per item
	// (task, http and workflow steps); MaxConcurrency bounds the iterations
	// delivered at once (0: no bound).
	Foreach        string `json:"foreach,omitempty"`
	MaxConcurrency int    `json:"max_concurrency,omitempty"`
	// Event names the event a wait step is completed by; Key (a string
	// template, rendered when the step starts waiting) narrows it.
	Event string `json:"event,omitempty"`
	Key   string `json:"key,omitempty"`
	// Definition is the definition a workflow step starts a child of
	// (required there).
	Definition string `json:"definition,omitempty"`
	// Concurrency bounds the leased tasks sharing a key, and RateLimit
	// their deliveries, across definitions and nodes (task and http steps;
	// see flowcontrol.go).
	Concurrency *StepConcurrency `json:"concurrency,omitempty"`
	RateLimit   *RateLimit       `json:"rate_limit,omitempty"`
}

// Join is how a step waits for its dependencies.
type Join string

// The joins.
const (
	// JoinAll (the default): ready when every dependency is COMPLETED;
	// SKIPPED when one is SKIPPED.
	JoinAll Join = "all"
	// JoinAny: ready when every dependency has finished (COMPLETED or
	// SKIPPED) and one at least is COMPLETED; SKIPPED when all are.
	JoinAny Join = "any"
	// JoinFirst: ready as soon as one dependency is COMPLETED; the
	// dependencies that have not finished are withdrawn (SKIPPED).
	JoinFirst Join = "first"
)

// Joins lists the joins.
var Joins = []Join{JoinAll, JoinAny, JoinFirst}

// MaxForeachItems bounds the array a foreach expression may give.
const MaxForeachItems = 10000

// MaxEventNameLength and MaxEventKeyLength bound an event's name and key.
const (
	MaxEventNameLength = 128
	MaxEventKeyLength  = 256
)

// EventQueuePrefix starts the queue of every task of a wait step waiting
// for an event. The engine serves these queues itself and never hands them
// to a worker: no claim names them (handler names cannot contain ':').
const EventQueuePrefix = "flowd:event/"

// EventQueue is the queue of the tasks of wait steps waiting for the event
// name with key. An event name has no '/', so the name ends at the first
// one after the prefix and the key, whatever it holds, is the rest.
func EventQueue(name, key string) string { return EventQueuePrefix + name + "/" + key }

// ParseEventQueue returns the event name and key of an event queue, and
// false for any other queue.
func ParseEventQueue(queue string) (name, key string, ok bool) {
	rest, ok := strings.CutPrefix(queue, EventQueuePrefix)
	if !ok {
		return "", "", false
	}
	return strings.Cut(rest, "/")
}

// EventNameProblem says what is wrong with an event name ("" when it is
// valid): 1–128 characters of [A-Za-z0-9._:-].
func EventNameProblem(name string) string {
	if name == "" {
		return "is required"
	}
	if len(name) > MaxEventNameLength {
		return fmt.Sprintf("is longer than %d characters", MaxEventNameLength)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return fmt.Sprintf("%q has a character outside [A-Za-z0-9._:-]", truncate(name))
		}
	}
	return ""
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
// ("30s", "10m", "1h30m"). Decoding rejects numbers other than 0 (YAML
// reads an unquoted 0 as one; it means the zero duration, as "0" does),
// unparsable strings and negative values.
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
	if string(bytes.TrimSpace(b)) == "0" {
		*d = 0
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf(`want a duration string with a unit such as "30s", "10m" or "1h30m", not %s`, describeJSON(b))
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		if strings.HasSuffix(s, "d") {
			return fmt.Errorf(`invalid duration %q (want a Go duration such as "30s", "10m" or "1h30m"; its largest unit is h: 720h is 30 days)`, truncate(s))
		}
		return fmt.Errorf(`invalid duration %q (want a Go duration such as "30s", "10m" or "1h30m")`, truncate(s))
	}
	if v < 0 {
		return fmt.Errorf("duration %q must not be negative", truncate(s))
	}
	*d = Duration(v)
	return nil
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
