// The interpreter: a pure state machine. Start and Resume take the state
// (Runtime), apply one event, and return what to write (Step); the engine
// turns every Item into a task row and calls Resume when it finishes.

package sw

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"
)

// Env is what the machine knows of the world at one step.
type Env struct {
	Now        time.Time
	WorkflowID string          // $workflow.id
	StartedAt  time.Time       // $workflow.startedAt
	RawInput   json.RawMessage // $workflow.input
	// MaxStateBytes bounds what an expression builds (see
	// workflow.ExprBudget; 0: the default).
	MaxStateBytes int
}

// ItemKind says what an item waits for.
type ItemKind string

// The kinds of items.
const (
	ItemTick   ItemKind = "tick"   // a pure leaf to evaluate now (RunAt = Now)
	ItemTimer  ItemKind = "timer"  // wait task, retry delay or timeout (RunAt later)
	ItemCall   ItemKind = "call"   // call: NAME → flowd handler NAME, Input = evaluated with
	ItemHTTP   ItemKind = "http"   // call: http | openapi, Input = the request
	ItemEmit   ItemKind = "emit"   // Input = the CloudEvent to publish
	ItemListen ItemKind = "listen" // Event = CloudEvent type, Key = subject
	ItemChild  ItemKind = "child"  // run: workflow: Definition = name, Input = child input
)

// Item is one piece of work the machine waits for.
type Item struct {
	ID         string          `json:"id"`
	Kind       ItemKind        `json:"kind"`
	Pointer    string          `json:"pointer"`
	Handler    string          `json:"handler,omitempty"`
	Input      json.RawMessage `json:"input,omitempty"`
	RunAt      time.Time       `json:"run_at,omitzero"`
	Event      string          `json:"event,omitempty"`
	Key        string          `json:"key,omitempty"`
	Definition string          `json:"definition,omitempty"`
	Timeout    time.Duration   `json:"timeout,omitempty"`
	// KeyOf, on a call a try's retry issues again, is the id of the
	// call's first item, whose idempotency key every issue keeps; Attempt
	// is how many attempts the earlier issues made, so the count goes on.
	KeyOf   string `json:"key_of,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
}

// Result is how an item finished.
type Result struct {
	Output json.RawMessage // call/http/emit/child output, listen: the event (CloudEvent JSON)
	Error  *Error          // the item failed: a DSL error raised at the item's task
	// Attempts is how many attempts the item's task made in all (its
	// Attempt included), 0 when not known: a call's retries count on.
	Attempts int
}

// Step is what one Start or Resume did: the version to write.
type Step struct {
	Cause     string
	Start     []Item
	Cancel    []string
	Completed bool
	Output    json.RawMessage
	Fault     *Error
}

// Runtime is the interpreter state of one instance, JSON-serialisable.
type Runtime struct {
	Seq      int                `json:"seq"`
	Context  json.RawMessage    `json:"context"`
	Items    map[string]Item    `json:"pending"`
	Fault    *Error             `json:"error,omitempty"`
	Done     bool               `json:"done,omitempty"`
	Output   json.RawMessage    `json:"output,omitempty"`
	FrameSeq int                `json:"frame_seq"`
	Frames   map[string]*Frame  `json:"frames,omitempty"`
	Waits    map[string]Waiting `json:"waits,omitempty"`
}

// Waiting says which frame a pending item belongs to and what it is for.
type Waiting struct {
	Frame  string `json:"frame"`
	Role   string `json:"role"`             // task | timeout | retry | listen
	Filter int    `json:"filter,omitempty"` // listen: the filter's index
}

// Item roles.
const (
	roleTask    = "task"
	roleTimeout = "timeout"
	roleRetry   = "retry"
	roleListen  = "listen"
	roleFinish  = "finish" // a composite finishes in its own version
)

// Pending returns the pending items in creation order.
func (rt *Runtime) Pending() []Item {
	out := make([]Item, 0, len(rt.Items))
	for _, it := range rt.Items {
		out = append(out, it)
	}
	sort.Slice(out, func(i, j int) bool { return seqOf(out[i].ID) < seqOf(out[j].ID) })
	return out
}

// ensureMaps makes the maps JSON left out (empty) writable again.
func (rt *Runtime) ensureMaps() {
	if rt.Frames == nil {
		rt.Frames = map[string]*Frame{}
	}
	if rt.Waits == nil {
		rt.Waits = map[string]Waiting{}
	}
}

// Error returns the fault, nil unless the workflow faulted.
func (rt *Runtime) Error() *Error { return rt.Fault }

func seqOf(id string) int {
	n, _ := strconv.Atoi(id[3:])
	return n
}

// Start begins an instance: the workflow's input.schema and input.from,
// then the first task.
func (w *Workflow) Start(env Env, input json.RawMessage) (*Runtime, Step, error) {
	rt := &Runtime{Context: json.RawMessage("{}"), Items: map[string]Item{}, Frames: map[string]*Frame{}, Waits: map[string]Waiting{}}
	x := &exec{w: w, rt: rt, env: env, cause: "workflow started"}
	in, err := x.decode(input)
	if err != nil {
		return nil, Step{}, fmt.Errorf("workflow input: %w", err)
	}
	if w.inputSchema != nil {
		if e := w.inputSchema.check(in, "/input/schema"); e != nil {
			x.fault(e)
			x.step.Cause = "workflow faulted"
			return rt, x.step, nil
		}
	}
	if w.inputFrom != nil {
		sc := x.scope(nil, nil, in, nil, nil)
		v, err := w.exprs.value(w.inputFrom, in, sc)
		if err != nil {
			x.fault(exprError("/input/from", err))
			x.step.Cause = "workflow faulted"
			return rt, x.step, nil
		}
		in = v
	}
	root := x.newFrame(nil, rootPtr, in)
	root.List = true
	x.enterList(root, w.root, in)
	x.step.Cause = x.cause
	return rt, x.step, nil
}

// rootPtr is the pointer of the document's task list.
const rootPtr = "/do"

// Resume applies the finishing of pending item id with res.
func (w *Workflow) Resume(env Env, rt *Runtime, id string, res Result) (Step, error) {
	it, ok := rt.Items[id]
	if !ok {
		return Step{}, ErrNotPending
	}
	rt.ensureMaps()
	wt, ok := rt.Waits[id]
	if !ok {
		return Step{}, fmt.Errorf("item %s has no frame", id)
	}
	f := rt.Frames[wt.Frame]
	if f == nil {
		return Step{}, fmt.Errorf("item %s: frame %s is gone", id, wt.Frame)
	}
	delete(rt.Items, id)
	delete(rt.Waits, id)
	x := &exec{w: w, rt: rt, env: env}
	switch wt.Role {
	case roleTimeout:
		x.raise(f, &Error{Type: ErrorType(KindTimeout), Status: 408, Title: "Timeout", Detail: "the task did not finish within its timeout", Instance: f.Ptr})
	case roleRetry:
		x.retryNow(f)
	case roleListen:
		x.received(f, wt.Filter, res)
	case roleFinish:
		x.finish(f, x.fromRaw(f.Result))
	default:
		x.itemDone(f, it, res)
	}
	if x.step.Cause == "" {
		x.step.Cause = x.cause
	}
	if x.step.Cause == "" {
		x.step.Cause = "task " + f.Ptr + " started"
	}
	return x.step, nil
}

// exec is one Start or Resume at work.
type exec struct {
	w     *Workflow
	rt    *Runtime
	env   Env
	step  Step
	cause string
	ended bool // the workflow completed or faulted in this step
	// values are the values decoded in this step (decoded.go).
	values decodedValues
}

func (x *exec) setCause(verb, ptr string) {
	if x.cause == "" {
		x.cause = "task " + ptr + " " + verb
	}
}

func (x *exec) task(f *Frame) *node { return x.w.tasks[f.Ptr] }

// addItem creates a pending item for frame f.
func (x *exec) addItem(f *Frame, it Item, role string, filter int) Item {
	x.rt.Seq++
	it.ID = "sw-" + strconv.Itoa(x.rt.Seq)
	if it.Pointer == "" {
		it.Pointer = f.Ptr
	}
	if it.Kind == ItemTick {
		it.RunAt = x.env.Now
	}
	x.rt.Items[it.ID] = it
	x.rt.Waits[it.ID] = Waiting{Frame: f.ID, Role: role, Filter: filter}
	x.step.Start = append(x.step.Start, it)
	return it
}

// cancelItem withdraws a pending item; one started in this same step is
// simply not started.
func (x *exec) cancelItem(id string) {
	delete(x.rt.Items, id)
	delete(x.rt.Waits, id)
	for i, it := range x.step.Start {
		if it.ID == id {
			x.step.Start = append(x.step.Start[:i:i], x.step.Start[i+1:]...)
			return
		}
	}
	x.step.Cancel = append(x.step.Cancel, id)
}

// cancelItemsOf withdraws every pending item of frame f.
func (x *exec) cancelItemsOf(f *Frame) {
	ids := []string{}
	for id, wt := range x.rt.Waits {
		if wt.Frame == f.ID {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return seqOf(ids[i]) < seqOf(ids[j]) })
	for _, id := range ids {
		x.cancelItem(id)
	}
}

// complete ends the workflow with out, the last task's output.
func (x *exec) complete(out any) {
	if x.ended {
		return
	}
	if x.w.outputAs != nil {
		sc := x.scope(nil, nil, out, out, nil)
		v, err := x.w.exprs.value(x.w.outputAs, out, sc)
		if err != nil {
			x.fault(exprError("/output/as", err))
			return
		}
		out = v
	}
	if x.w.outputSchema != nil {
		if e := x.w.outputSchema.check(out, "/output/schema"); e != nil {
			x.fault(e)
			return
		}
	}
	x.ended = true
	x.dropAll()
	x.rt.Done = true
	x.rt.Output = toRaw(out)
	x.step.Completed = true
	x.step.Output = x.rt.Output
}

// fault ends the workflow with e.
func (x *exec) fault(e *Error) {
	if x.ended {
		return
	}
	x.ended = true
	x.dropAll()
	x.rt.Fault = e
	x.step.Fault = e
}

// dropAll withdraws every pending item and frame.
func (x *exec) dropAll() {
	ids := make([]string, 0, len(x.rt.Items))
	for id := range x.rt.Items {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return seqOf(ids[i]) < seqOf(ids[j]) })
	for _, id := range ids {
		x.cancelItem(id)
	}
	x.rt.Frames = map[string]*Frame{}
}

func toRaw(v any) json.RawMessage {
	b, err := encodeJSON(v)
	if err != nil {
		return json.RawMessage("null")
	}
	return b
}

func exprError(ptr string, err error) *Error {
	return &Error{Type: ErrorType(KindExpression), Status: 400, Title: "Expression failed", Detail: err.Error(), Instance: ptr}
}
