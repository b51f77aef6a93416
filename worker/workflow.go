package worker

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/client"
	"github.com/flowd/flowd/worker/task"
)

// Workflows as code. A Workflow's function runs on this worker; each of
// its steps is recorded on the server as it finishes, and after a crash, a
// lost lease or a deploy the function runs again from the top: every step
// already recorded returns its recorded result instead of running again.
// So a function must make the same calls in the same order every time it
// runs (its decisions may depend on recorded results, never on the clock,
// randomness or anything read outside a step: use Now, Random and UUID).

// Workflow is a code workflow a worker serves under its name: Run is its
// function; Timeout and Retry (of the function's runs) go into the code
// definition the worker puts when it starts.
type Workflow struct {
	Run     WorkflowFunc
	Timeout time.Duration
	Retry   *RetryPolicy
}

// RetryPolicy says how often and how fast a failure is tried again. Zero
// fields take the server's defaults for runs (3 attempts, 1s doubling up
// to 1m) and the same for steps.
type RetryPolicy struct {
	MaxAttempts    int
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
}

// WorkflowFunc is a code workflow's function on JSON: its input, and the
// output the workflow completes with. An error fails the run, which is
// retried per the definition's retry (Permanent: the workflow fails).
type WorkflowFunc func(wf *WorkflowContext, input json.RawMessage) (json.RawMessage, error)

// Func makes a WorkflowFunc of a typed function: the input is decoded into
// I, the output encoded from O.
func Func[I, O any](fn func(wf *WorkflowContext, in I) (O, error)) WorkflowFunc {
	return func(wf *WorkflowContext, input json.RawMessage) (json.RawMessage, error) {
		var in I
		if len(input) > 0 && string(input) != "null" {
			if err := json.Unmarshal(input, &in); err != nil {
				return nil, Permanent(fmt.Errorf("the workflow's input does not decode into %T: %w", in, err))
			}
		}
		out, err := fn(wf, in)
		if err != nil {
			return nil, err
		}
		return json.Marshal(out)
	}
}

// StepFailedError is what a step that failed for good gives the code: its
// last error, after its attempts. The code may handle it (a compensation).
type StepFailedError struct {
	Step     string
	Message  string
	Attempts int
}

func (e *StepFailedError) Error() string {
	return fmt.Sprintf("step %q failed after %d attempts: %s", e.Step, e.Attempts, e.Message)
}

// NonDeterminismError: the code asked, under a name its journal records,
// for another kind of thing than was recorded. The workflow fails for good.
type NonDeterminismError struct {
	Step          string
	Recorded, Now string
}

func (e *NonDeterminismError) Error() string {
	return fmt.Sprintf("non-determinism: step %q was recorded as a %s, and the code now asks for a %s under that name", e.Step, e.Recorded, e.Now)
}

// TimeoutError is what an event wait whose timeout passed gives the code.
type TimeoutError struct {
	Step    string
	Message string
}

func (e *TimeoutError) Error() string { return fmt.Sprintf("step %q timed out: %s", e.Step, e.Message) }

// settled reports an error a run returned that a replay gives again: a
// step that failed for good, a wait that timed out.
func settled(err error) bool {
	var failed *StepFailedError
	var timeout *TimeoutError
	return err != nil && !task.IsPermanent(err) && (errors.As(err, &failed) || errors.As(err, &timeout))
}

// errorType is the type of a recorded error object ("" for a message).
func errorType(raw json.RawMessage) string {
	var o struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(raw, &o)
	return o.Type
}

// ErrCancelled: the run lost its lease (the workflow was cancelled or
// paused past its lease, or another run took over): nothing more of it is
// recorded, and the SDK stops the function.
var ErrCancelled = errors.New("the run no longer holds its lease")

// The kinds of recorded entries.
const (
	kindStep  = "step"
	kindSleep = "sleep"
	kindEvent = "event"
	kindChild = "child"
)

// WorkflowContext is one run of a code workflow, as its function sees it.
// Its methods may be called from the function's goroutine; steps started
// with Go run on goroutines of their own.
type WorkflowContext struct {
	ctx     context.Context
	b       RunBackend
	send    func(ctx context.Context, call func(context.Context) error) error
	task    Task
	journal map[string]api.JournalEntry

	mu      sync.Mutex
	uses    map[string]int
	pending sync.WaitGroup
}

// Context is the run's context: it ends when the run loses its lease or
// the worker shuts down.
func (wf *WorkflowContext) Context() context.Context { return wf.ctx }

// WorkflowID is the workflow's id.
func (wf *WorkflowContext) WorkflowID() string { return wf.task.WorkflowID }

// Attempt counts the runs since the start or the last wait (1 for the
// first).
func (wf *WorkflowContext) Attempt() int { return wf.task.Attempt }

// key is the name a call of name records under: name the first time in a
// run, name#2, name#3, … after.
func (wf *WorkflowContext) key(name string) string {
	if err := nameProblem(name); err != nil {
		// A mistake of the code: no run would get past it.
		panic(runEnd{err: Permanent(err)})
	}
	wf.mu.Lock()
	defer wf.mu.Unlock()
	wf.uses[name]++
	if n := wf.uses[name]; n > 1 {
		return name + "#" + strconv.Itoa(n)
	}
	return name
}

// nameProblem says what is wrong with a step name: 1-128 characters of
// [A-Za-z0-9._:-] (the SDK numbers a name used again).
func nameProblem(name string) error {
	if name == "" || len(name) > 128 {
		return fmt.Errorf("step name %q must be 1-128 characters long", name)
	}
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return fmt.Errorf("step name %q has %q: use [A-Za-z0-9._:-]", name, c)
		}
	}
	return nil
}

// recorded returns the journal's entry of key when it is of kind; another
// kind is non-determinism, which ends the run.
func (wf *WorkflowContext) recorded(key, kind string) (api.JournalEntry, bool) {
	wf.mu.Lock()
	e, ok := wf.journal[key]
	wf.mu.Unlock()
	if !ok {
		return e, false
	}
	was := e.Kind
	if was == "" {
		was = kindStep
	}
	if was != kind {
		panic(runEnd{err: Permanent(&NonDeterminismError{Step: key, Recorded: was, Now: kind})})
	}
	return e, true
}

// runEnd unwinds the function's goroutine when the run is over: it was
// suspended, lost its lease, or found non-determinism (err, reported as
// the run's failure).
type runEnd struct {
	err error
}

var errSuspended = errors.New("the run ended waiting")

// Future is a step started with Go: Get waits for its result.
type Future[T any] struct {
	done  chan struct{}
	name  string
	entry api.JournalEntry
	err   error
}

// Get waits for the step and returns its output, or a *StepFailedError.
func (f *Future[T]) Get() (T, error) {
	<-f.done
	var out T
	if f.err != nil {
		panic(runEnd{err: f.err})
	}
	if f.entry.Status == "FAILED" {
		return out, &StepFailedError{Step: f.name, Message: api.ErrorMessage(f.entry.Error), Attempts: f.entry.Attempts}
	}
	if len(f.entry.Output) > 0 && string(f.entry.Output) != "null" {
		if err := json.Unmarshal(f.entry.Output, &out); err != nil {
			return out, fmt.Errorf("step %q: its recorded output does not decode into %T: %w", f.name, out, err)
		}
	}
	return out, nil
}

// StepOption configures a step.
type StepOption func(*stepOptions)

type stepOptions struct{ retry RetryPolicy }

// WithRetry sets the step's retry policy (default: 3 attempts, 1s doubling
// up to 1m). The worker retries the step itself; only its last outcome is
// recorded.
func WithRetry(p RetryPolicy) StepOption { return func(o *stepOptions) { o.retry = p } }

// Step runs fn as the step name unless it is recorded, and returns its
// output: fn's, or the recorded one. fn runs at least once until recorded,
// so its side effects should be keyed on IdempotencyKey(ctx), the same for
// every attempt and run (WORKFLOW_ID/NAME). A step that fails for good
// returns a *StepFailedError.
func Step[T any](wf *WorkflowContext, name string, fn func(ctx context.Context) (T, error), opts ...StepOption) (T, error) {
	return Go(wf, name, fn, opts...).Get()
}

// Go starts the step name on a goroutine of its own (parallel steps): its
// name is taken, and numbered, in the order the code starts steps, and it
// is recorded on its own when it finishes.
func Go[T any](wf *WorkflowContext, name string, fn func(ctx context.Context) (T, error), opts ...StepOption) *Future[T] {
	key := wf.key(name)
	f := &Future[T]{done: make(chan struct{}), name: key}
	if e, ok := wf.recorded(key, kindStep); ok {
		f.entry = e
		close(f.done)
		return f
	}
	o := stepOptions{}
	for _, opt := range opts {
		opt(&o)
	}
	wf.pending.Add(1)
	go func() {
		defer wf.pending.Done()
		defer close(f.done)
		f.entry, f.err = wf.runStep(key, o.retry, func(ctx context.Context) (json.RawMessage, error) {
			v, err := fn(ctx)
			if err != nil {
				return nil, err
			}
			return json.Marshal(v)
		})
	}()
	return f
}

type idempotencyKey struct{}

// IdempotencyKey is the idempotency key of the step whose function ctx was
// given to: WORKFLOW_ID/NAME.
func IdempotencyKey(ctx context.Context) string {
	k, _ := ctx.Value(idempotencyKey{}).(string)
	return k
}

// runStep runs fn with its attempts, then records the outcome: the entry
// recorded (maybe by an earlier run) is the step's.
func (wf *WorkflowContext) runStep(key string, p RetryPolicy, fn func(ctx context.Context) (json.RawMessage, error)) (api.JournalEntry, error) {
	p = p.withDefaults()
	ctx := context.WithValue(wf.ctx, idempotencyKey{}, wf.task.WorkflowID+"/"+key)
	var req api.CheckpointRequest
	for attempt := 1; ; attempt++ {
		out, err := callStep(ctx, fn)
		if err == nil {
			req = api.CheckpointRequest{Lease: wf.task.Lease, Output: out, Attempts: attempt}
			break
		}
		if wf.ctx.Err() != nil {
			return api.JournalEntry{}, ErrCancelled
		}
		if task.IsPermanent(err) || attempt >= p.MaxAttempts {
			msg, _ := json.Marshal(err.Error())
			req = api.CheckpointRequest{Lease: wf.task.Lease, Error: msg, Attempts: attempt}
			break
		}
		sleep(wf.ctx, p.backoff(attempt))
	}
	return wf.checkpoint(key, req)
}

// callStep calls fn; a panic is a failed attempt, output that is not JSON
// a failure for good.
func callStep(ctx context.Context, fn func(ctx context.Context) (json.RawMessage, error)) (out json.RawMessage, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("step panicked: %v", v)
		}
	}()
	return fn(ctx)
}

// checkpoint records key, retrying what retrying may mend; a run that
// lost its lease is over (ErrCancelled).
func (wf *WorkflowContext) checkpoint(key string, req api.CheckpointRequest) (api.JournalEntry, error) {
	var entry *api.JournalEntry
	err := wf.send(wf.ctx, func(ctx context.Context) error {
		var err error
		entry, err = wf.b.Checkpoint(ctx, wf.task.ID, key, req)
		return err
	})
	switch {
	case err == nil:
		wf.mu.Lock()
		wf.journal[key] = *entry
		wf.mu.Unlock()
		return *entry, nil
	case leaseLost(err):
		return api.JournalEntry{}, fmt.Errorf("%w: %w", ErrCancelled, err)
	case client.StatusCode(err) == http.StatusBadRequest || client.StatusCode(err) == http.StatusRequestEntityTooLarge:
		return api.JournalEntry{}, Permanent(fmt.Errorf("the server refused the outcome of step %q: %w", key, err))
	}
	return api.JournalEntry{}, err
}

// Sleep waits d, recorded as name: the run ends, and the workflow holds no
// worker until the timer fires on the server and the next run replays.
func (wf *WorkflowContext) Sleep(name string, d time.Duration) error {
	_, err := Value[any](wf.Select(wf.Timer(name, d)))
	return err
}

// EventOption configures WaitForEvent.
type EventOption func(*api.Wait)

// WithKey narrows the wait to events published with key.
func WithKey(key string) EventOption { return func(w *api.Wait) { w.Key = key } }

// WithTimeout ends the wait with a *TimeoutError when no event came within
// d.
func WithTimeout(d time.Duration) EventOption {
	return func(w *api.Wait) {
		s := d.String()
		w.Timeout = &s
	}
}

// WaitForEvent waits, recorded as name, for the event published under
// event (and the key, WithKey) and returns its data: an event published
// since the workflow started counts, even before the wait began.
func WaitForEvent[T any](wf *WorkflowContext, name, event string, opts ...EventOption) (T, error) {
	return Value[T](wf.Select(wf.Event(name, event, opts...)))
}

// Child starts, recorded as name, a child workflow of definition (of any
// kind: flowd steps, Serverless Workflow or code) with input, waits for it
// and returns its output; a child that does not complete gives a
// *StepFailedError.
func Child[T any](wf *WorkflowContext, name, definition string, input any) (T, error) {
	return Value[T](wf.Select(wf.ChildWorkflow(name, definition, input)))
}

// Pending is something a run can wait for — a timer, an event, a child
// workflow — named and numbered when it is made (Timer, Event,
// ChildWorkflow), waited for with Select, read with Value.
type Pending struct {
	key   string
	wait  api.Wait
	entry api.JournalEntry
	// err is a mistake found when it was made (an input that does not
	// encode): Value returns it.
	err error
}

// finished reports whether the wait is over in the journal.
func (p *Pending) finished() bool {
	switch p.entry.Status {
	case "COMPLETED", "FAILED", "CANCELLED":
		return true
	}
	return false
}

// order is when the wait finished among the workflow's waits.
func (p *Pending) order() int {
	if p.entry.Finished > 0 {
		return p.entry.Finished
	}
	return math.MaxInt
}

func (wf *WorkflowContext) newPending(name, kind string, w api.Wait) *Pending {
	p := &Pending{key: wf.key(name), wait: w}
	if e, ok := wf.recorded(p.key, kind); ok {
		p.entry = e
	}
	return p
}

// Timer is a sleep of d, recorded as name, to wait for with Select.
func (wf *WorkflowContext) Timer(name string, d time.Duration) *Pending {
	s := d.String()
	return wf.newPending(name, kindSleep, api.Wait{Sleep: &s})
}

// Event is a wait for the event published under event (WithKey,
// WithTimeout), recorded as name, to wait for with Select.
func (wf *WorkflowContext) Event(name, event string, opts ...EventOption) *Pending {
	w := api.Wait{Event: &event}
	for _, opt := range opts {
		opt(&w)
	}
	return wf.newPending(name, kindEvent, w)
}

// ChildWorkflow is a child workflow of definition with input, recorded as
// name, to wait for with Select: it starts when the run waits for it.
func (wf *WorkflowContext) ChildWorkflow(name, definition string, input any) *Pending {
	raw, err := json.Marshal(input)
	p := wf.newPending(name, kindChild, api.Wait{Child: &api.ChildWait{Definition: definition, Input: raw}})
	if err != nil {
		p.err = Permanent(fmt.Errorf("the input of child %q does not encode: %w", p.key, err))
	}
	return p
}

// Select waits for the first of ps to finish and returns it: the one that
// finished first on the server, the same in every replay. When none has
// finished, the run ends waiting for all of them (once the steps in
// flight are recorded), and the next run replays to here.
func (wf *WorkflowContext) Select(ps ...*Pending) *Pending {
	var first *Pending
	for _, p := range ps {
		if p.err != nil {
			return p
		}
		if p.finished() && (first == nil || p.order() < first.order()) {
			first = p
		}
	}
	if first != nil {
		return first
	}
	waits := make(map[string]api.Wait, len(ps))
	for _, p := range ps {
		waits[p.key] = p.wait
	}
	wf.suspend(waits)
	return nil
}

// Value is what a finished wait gave: an event's data, a child's output
// (nothing for a timer); a *TimeoutError for an event wait that timed out,
// a *StepFailedError for a child that did not complete.
func Value[T any](p *Pending) (T, error) {
	var out T
	switch {
	case p.err != nil:
		return out, p.err
	case !p.finished():
		return out, fmt.Errorf("%q has not finished: Select it first", p.key)
	case p.entry.Status != "COMPLETED":
		if errorType(p.entry.Error) == "timeout" {
			return out, &TimeoutError{Step: p.key, Message: api.ErrorMessage(p.entry.Error)}
		}
		return out, &StepFailedError{Step: p.key, Message: api.ErrorMessage(p.entry.Error), Attempts: max(p.entry.Attempts, 1)}
	}
	if len(p.entry.Output) > 0 && string(p.entry.Output) != "null" {
		if err := json.Unmarshal(p.entry.Output, &out); err != nil {
			return out, fmt.Errorf("%q gave %s, which does not decode into %T: %w", p.key, p.entry.Output, out, err)
		}
	}
	return out, nil
}

// suspend ends the run waiting for waits once the steps in flight are
// recorded; it does not return.
func (wf *WorkflowContext) suspend(waits map[string]api.Wait) {
	wf.pending.Wait()
	err := wf.send(wf.ctx, func(ctx context.Context) error {
		return wf.b.Suspend(ctx, wf.task.ID, wf.task.Lease, waits)
	})
	switch {
	case err == nil:
		panic(runEnd{err: errSuspended})
	case leaseLost(err):
		panic(runEnd{err: fmt.Errorf("%w: %w", ErrCancelled, err)})
	}
	panic(runEnd{err: fmt.Errorf("suspending the run: %w", err)})
}

// Set writes state.variables.KEY = value, a versioned write others can
// read (GET /v1/workflows/{id}, or poll it with If-None-Match). Setting
// the value it has writes nothing, so a replay costs no version.
func (wf *WorkflowContext) Set(key string, value any) error {
	raw, err := json.Marshal(value)
	if err != nil {
		return fmt.Errorf("variable %q does not encode: %w", key, err)
	}
	err = wf.send(wf.ctx, func(ctx context.Context) error {
		return wf.b.SetVariable(ctx, wf.task.ID, wf.task.Lease, key, raw)
	})
	if leaseLost(err) {
		panic(runEnd{err: fmt.Errorf("%w: %w", ErrCancelled, err)})
	}
	return err
}

// Search sets the instance's search attribute NAME
// ([a-z][a-z0-9_]{0,62}) to value, a string, a number or a boolean, in a
// versioned write: GET /v1/workflows?search.NAME=VALUE finds the instance
// from then on. Setting the value it has writes nothing, so a replay
// costs no version.
func (wf *WorkflowContext) Search(name string, value any) error {
	raw, err := json.Marshal(value)
	if err != nil {
		return fmt.Errorf("search attribute %q does not encode: %w", name, err)
	}
	err = wf.send(wf.ctx, func(ctx context.Context) error {
		return wf.b.SetSearch(ctx, wf.task.ID, wf.task.Lease, name, raw)
	})
	if leaseLost(err) {
		panic(runEnd{err: fmt.Errorf("%w: %w", ErrCancelled, err)})
	}
	return err
}

// Now is the time, recorded as a step: the same in every run.
func (wf *WorkflowContext) Now() time.Time {
	t, err := Step(wf, "flowd:now", func(context.Context) (time.Time, error) { return time.Now().UTC(), nil })
	if err != nil {
		panic(runEnd{err: err})
	}
	return t
}

// Random is a number in [0, 1), recorded as a step.
func (wf *WorkflowContext) Random() float64 {
	f, err := Step(wf, "flowd:random", func(context.Context) (float64, error) {
		n, err := rand.Int(rand.Reader, big.NewInt(1<<53))
		if err != nil {
			return 0, err
		}
		return float64(n.Int64()) / (1 << 53), nil
	})
	if err != nil {
		panic(runEnd{err: err})
	}
	return f
}

// UUID is a random (version 4) UUID, recorded as a step.
func (wf *WorkflowContext) UUID() string {
	u, err := Step(wf, "flowd:uuid", func(context.Context) (string, error) { return newUUID(), nil })
	if err != nil {
		panic(runEnd{err: err})
	}
	return u
}

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = 3
	}
	if p.InitialBackoff <= 0 {
		p.InitialBackoff = time.Second
	}
	if p.MaxBackoff <= 0 {
		p.MaxBackoff = time.Minute
	}
	return p
}

// backoff is the wait after the nth failed attempt: doubling from the
// initial backoff up to the maximum.
func (p RetryPolicy) backoff(n int) time.Duration {
	d := float64(p.InitialBackoff) * math.Pow(2, float64(n-1))
	return time.Duration(min(d, float64(p.MaxBackoff)))
}

// runWorkflow runs one run of w for t: its output, or its error. A run
// that ended waiting returns errSuspended (reported already); one that lost
// its lease ErrCancelled (nothing to report).
func (r *runner) runWorkflow(ctx context.Context, t Task, w Workflow) (out json.RawMessage, err error) {
	return runWorkflow(ctx, t, w, r.cfg.Client, func(ctx context.Context, call func(context.Context) error) error {
		return r.report(ctx, &leaseClock{until: time.Now().Add(time.Minute)}, call)
	})
}

// runWorkflow runs one run of w for t, recording through b with send
// (which retries what retrying may mend).
func runWorkflow(ctx context.Context, t Task, w Workflow, b RunBackend, send func(context.Context, func(context.Context) error) error) (out json.RawMessage, err error) {
	wf := &WorkflowContext{ctx: ctx, b: b, send: send, task: t, journal: map[string]api.JournalEntry{}, uses: map[string]int{}}
	if len(t.Journal) > 0 {
		if err := json.Unmarshal(t.Journal, &wf.journal); err != nil {
			return nil, fmt.Errorf("the run's journal does not decode: %w", err)
		}
	}
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		if end, ok := v.(runEnd); ok {
			out, err = nil, end.err
			return
		}
		out, err = nil, fmt.Errorf("workflow panicked: %v", v)
	}()
	out, err = w.Run(wf, t.Input)
	// Steps started and never awaited are recorded before the run ends.
	wf.pending.Wait()
	if settled(err) {
		// Running the function again would replay the same outcome.
		err = Permanent(err)
	}
	return out, err
}

// RunBackend is what a run of a code workflow records through: the
// server's task routes (a *client.Client), or, in process on an embedded
// server, the engine itself (server.Server.RegisterWorkflow). An error
// wrapping ErrCancelled, or a 409 or 404 answer, means the run no longer
// holds its lease.
type RunBackend interface {
	Checkpoint(ctx context.Context, taskID, name string, req api.CheckpointRequest) (*api.JournalEntry, error)
	Suspend(ctx context.Context, taskID, lease string, waits map[string]api.Wait) error
	SetVariable(ctx context.Context, taskID, lease, key string, value json.RawMessage) error
	SetSearch(ctx context.Context, taskID, lease, name string, value json.RawMessage) error
}

// leaseLost reports an error that says the run no longer holds its lease.
func leaseLost(err error) bool {
	return errors.Is(err, ErrCancelled) || client.IsConflict(err) || client.IsNotFound(err)
}

// WorkflowHandler is the handler of w's runs in process (an embedded
// server's engine delivers them, with their journal): each call is one
// run, recording through b. A run that ended waiting, or lost its lease,
// returns an error wrapping task.ErrRunEnded: its outcome is recorded
// already, or by nobody.
func WorkflowHandler(w Workflow, b RunBackend) Handler {
	once := func(ctx context.Context, call func(context.Context) error) error { return call(ctx) }
	return func(ctx context.Context, t Task) (json.RawMessage, error) {
		out, err := runWorkflow(ctx, t, w, b, once)
		if errors.Is(err, errSuspended) || errors.Is(err, ErrCancelled) {
			return nil, fmt.Errorf("%w: %w", task.ErrRunEnded, err)
		}
		if err == nil && len(out) == 0 {
			out = json.RawMessage("null")
		}
		return out, err
	}
}

// Definition is the code definition w is put under name: what a worker
// that serves it puts when it starts.
func (w Workflow) Definition(name string) ([]byte, error) { return definitionOf(name, w) }

// definitionOf is the code definition w is put under name.
func definitionOf(name string, w Workflow) ([]byte, error) {
	def := map[string]any{"name": name, "code": map[string]string{"handler": name}}
	if w.Timeout > 0 {
		def["timeout"] = w.Timeout.String()
	}
	if p := w.Retry; p != nil {
		retry := map[string]any{}
		if p.MaxAttempts > 0 {
			retry["max_attempts"] = p.MaxAttempts
		}
		if p.InitialBackoff > 0 {
			retry["initial_backoff"] = p.InitialBackoff.String()
		}
		if p.MaxBackoff > 0 {
			retry["max_backoff"] = p.MaxBackoff.String()
		}
		def["retry"] = retry
	}
	return json.Marshal(def)
}
