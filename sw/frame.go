package sw

import (
	"encoding/json"
	"sort"
	"strconv"
	"time"

	"github.com/flowd/flowd/workflow"
)

// Frame is one active task (or task list) of the instance. Frames form a
// tree by Parent; fork branches are sibling frames running at once.
type Frame struct {
	ID        string          `json:"id"`
	Parent    string          `json:"parent,omitempty"`
	Ptr       string          `json:"ptr"`            // the task's pointer, or the list's
	List      bool            `json:"list,omitempty"` // a task list, not a task
	RawInput  json.RawMessage `json:"raw_input,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"` // the transformed input
	StartedAt time.Time       `json:"started_at"`
	Index     int             `json:"index"` // list: current task; for: iteration
	Branch    int             `json:"branch,omitempty"`

	Collection []json.RawMessage          `json:"collection,omitempty"` // for
	Vars       map[string]json.RawMessage `json:"vars,omitempty"`       // for and catch variables defined here
	Phase      string                     `json:"phase,omitempty"`      // try: try | catch | retry
	Attempt    int                        `json:"attempt,omitempty"`    // try: retries so far
	Calls      map[string]CallIssues      `json:"calls,omitempty"`      // try: the calls of its try list, for its retries
	FirstAt    time.Time                  `json:"first_at,omitzero"`    // try: when the first attempt began
	Outputs    []json.RawMessage          `json:"outputs,omitempty"`    // fork: by branch; listen: events
	Received   []bool                     `json:"received,omitempty"`   // fork: branch done; listen all: filter matched
	Result     json.RawMessage            `json:"result,omitempty"`     // a composite whose finish waits for its own version: its raw output
}

func (x *exec) newFrame(parent *Frame, ptr string, raw any) *Frame {
	x.rt.FrameSeq++
	f := &Frame{ID: "f" + strconv.Itoa(x.rt.FrameSeq), Ptr: ptr, RawInput: toRaw(raw), StartedAt: x.env.Now}
	if parent != nil {
		f.Parent = parent.ID
	}
	x.rt.Frames[f.ID] = f
	return f
}

func (x *exec) parent(f *Frame) *Frame {
	if f.Parent == "" {
		return nil
	}
	return x.rt.Frames[f.Parent]
}

// children returns f's child frames in creation order.
func (x *exec) children(f *Frame) []*Frame {
	var out []*Frame
	for _, c := range x.rt.Frames {
		if c.Parent == f.ID {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return frameSeq(out[i].ID) < frameSeq(out[j].ID) })
	return out
}

func frameSeq(id string) int {
	n, _ := strconv.Atoi(id[1:])
	return n
}

// removeFrame drops f and its pending items.
func (x *exec) removeFrame(f *Frame) {
	x.cancelItemsOf(f)
	delete(x.rt.Frames, f.ID)
}

// removeBelow drops every frame under f, with their pending items.
func (x *exec) removeBelow(f *Frame) {
	for _, c := range x.children(f) {
		x.removeBelow(c)
		x.removeFrame(c)
	}
}

// variable looks a for or catch variable up from f towards the root.
func (x *exec) variable(f *Frame, name string) any {
	for c := f; c != nil; c = x.parent(c) {
		if v, ok := c.Vars[name]; ok {
			return x.fromRaw(v)
		}
	}
	return nil
}

// scope builds the arguments of an evaluation at frame f (nil: the
// workflow level) for a program compiled with names; extra overrides
// variables not yet stored.
func (x *exec) scope(f *Frame, names []string, input, output any, extra map[string]any) *scope {
	// $workflow (the workflow's input) and $context are decoded only for a
	// program that reads them.
	wf := lazyArg(func() any {
		return map[string]any{
			"id":         x.env.WorkflowID,
			"definition": x.w.doc,
			"input":      x.fromRaw(x.env.RawInput),
			"startedAt":  timeArg(x.env.StartedAt),
		}
	})
	contextText := x.rt.Context
	var task any
	if f != nil {
		n := x.task(f)
		t := map[string]any{
			"reference": f.Ptr,
			"input":     input,
			"output":    output,
			"startedAt": timeArg(f.StartedAt),
		}
		if n != nil {
			t["name"] = n.name
			t["definition"] = n.def
		}
		task = t
	}
	sc := &scope{
		budget: workflow.ExprBudget{MaxStateBytes: x.env.MaxStateBytes},
		names:  names,
		args: []any{
			lazyArg(func() any { return x.fromRaw(contextText) }), input, output, map[string]any{}, task, wf,
			map[string]any{"name": "flowd", "version": Version},
		},
		vars: map[string]any{},
	}
	for _, n := range names {
		if v, ok := extra[n]; ok {
			sc.vars[n] = v
		} else if f != nil {
			sc.vars[n] = x.variable(f, n)
		}
	}
	return sc
}

func timeArg(t time.Time) map[string]any {
	return map[string]any{
		"iso8601": t.UTC().Format(time.RFC3339Nano),
		"epoch": map[string]any{
			"seconds":      json.Number(strconv.FormatInt(t.Unix(), 10)),
			"milliseconds": json.Number(strconv.FormatInt(t.UnixMilli(), 10)),
		},
	}
}
