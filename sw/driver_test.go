package sw

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// driver runs a workflow to its end the way the engine would: ticks and
// timers fire at once (the clock jumps to a timer's RunAt), http and call
// items are answered by the test's functions, listen items by queued
// events; timeout timers fire only when nothing else can happen.
type driver struct {
	t       *testing.T
	w       *Workflow
	rt      *Runtime
	env     Env
	http    func(req httpRequest) Result
	call    func(handler string, input json.RawMessage) Result
	child   func(it Item) Result
	events  []json.RawMessage // CloudEvents, delivered to the first listen item of their type
	causes  []string
	items   []Item   // every item started, in order
	cancels []string // every item cancelled, in order
	last    Step
	// after, if set, runs after every step (e.g. a JSON round trip).
	after func(d *driver)
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func newDriver(t *testing.T, doc string) *driver {
	t.Helper()
	w, err := Parse([]byte(doc))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return &driver{t: t, w: w, env: Env{Now: t0, WorkflowID: "wf1", StartedAt: t0}}
}

func (d *driver) record(st Step) {
	d.last = st
	d.causes = append(d.causes, st.Cause)
	d.items = append(d.items, st.Start...)
	d.cancels = append(d.cancels, st.Cancel...)
	if d.after != nil {
		d.after(d)
	}
}

// run starts the workflow with input and runs it until it completes,
// faults or nothing more can happen.
func (d *driver) run(input string) Step {
	d.t.Helper()
	d.env.RawInput = json.RawMessage(input)
	rt, st, err := d.w.Start(d.env, json.RawMessage(input))
	if err != nil {
		d.t.Fatalf("Start: %v", err)
	}
	d.rt = rt
	d.record(st)
	for i := 0; i < 1000 && !d.last.Completed && d.last.Fault == nil; i++ {
		id, res, ok := d.next()
		if !ok {
			return d.last
		}
		st, err := d.w.Resume(d.env, d.rt, id, res)
		if err != nil {
			d.t.Fatalf("Resume %s: %v", id, err)
		}
		d.record(st)
	}
	return d.last
}

// next picks the item to finish and its result.
func (d *driver) next() (string, Result, bool) {
	pending := d.rt.Pending()
	for _, it := range pending {
		switch it.Kind {
		case ItemTick:
			return it.ID, Result{}, true
		case ItemHTTP:
			var req httpRequest
			if err := json.Unmarshal(it.Input, &req); err != nil {
				d.t.Fatalf("http item input: %v", err)
			}
			return it.ID, d.http(req), true
		case ItemCall:
			return it.ID, d.call(it.Handler, it.Input), true
		case ItemChild:
			return it.ID, d.child(it), true
		case ItemEmit:
			return it.ID, Result{Output: it.Input}, true
		case ItemListen:
			for i, ev := range d.events {
				var e struct{ Type, Subject string }
				_ = json.Unmarshal(ev, &e)
				if e.Type == it.Event && e.Subject == it.Key {
					d.events = append(d.events[:i:i], d.events[i+1:]...)
					return it.ID, Result{Output: ev}, true
				}
			}
		}
	}
	// Timers: the earliest first, timeouts only when nothing else is left.
	var best *Item
	for _, it := range pending {
		if it.Kind != ItemTimer {
			continue
		}
		if best == nil || it.RunAt.Before(best.RunAt) ||
			d.rt.Waits[best.ID].Role == roleTimeout && d.rt.Waits[it.ID].Role != roleTimeout {
			b := it
			best = &b
		}
	}
	if best == nil {
		return "", Result{}, false
	}
	if best.RunAt.After(d.env.Now) {
		d.env.Now = best.RunAt
	}
	return best.ID, Result{}, true
}

func (d *driver) wantCauses(want ...string) {
	d.t.Helper()
	got := strings.Join(d.causes, "\n")
	if w := strings.Join(want, "\n"); got != w {
		d.t.Errorf("causes:\n%s\nwant:\n%s", got, w)
	}
}

// jsonEqual compares JSON texts by value.
func jsonEqual(t *testing.T, what string, got json.RawMessage, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: %v in %s", what, err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: want: %v", what, err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if string(gb) != string(wb) {
		t.Errorf("%s = %s, want %s", what, gb, wb)
	}
}

func (d *driver) wantOutput(want string) {
	d.t.Helper()
	if !d.last.Completed {
		d.t.Fatalf("not completed: last step %+v (fault %v)", d.last, d.last.Fault)
	}
	jsonEqual(d.t, "output", d.last.Output, want)
}

func (d *driver) wantFault(want Error) {
	d.t.Helper()
	if d.last.Fault == nil {
		d.t.Fatalf("no fault: last step %+v, output %s", d.last, d.last.Output)
	}
	if *d.last.Fault != want {
		d.t.Errorf("fault = %+v, want %+v", *d.last.Fault, want)
	}
	if d.rt.Error() == nil || *d.rt.Error() != want {
		d.t.Errorf("Runtime.Error() = %v", d.rt.Error())
	}
	if len(d.rt.Items) != 0 {
		d.t.Errorf("pending after fault: %v", d.rt.Items)
	}
}

// petstore answers the http calls of the CTK scenarios like the stub does.
func petstore(req httpRequest) Result {
	pet := func(id string) json.RawMessage {
		return json.RawMessage(`{"id":` + id + `,"name":"x","status":"available"}`)
	}
	var vars map[string]any
	_ = json.Unmarshal(req.Vars, &vars)
	uri := req.URI
	for k, v := range vars {
		b, _ := json.Marshal(v)
		uri = strings.ReplaceAll(uri, "{"+k+"}", strings.Trim(string(b), `"`))
	}
	var body json.RawMessage
	switch {
	case strings.Contains(uri, "getPetByName"):
		return Result{Error: &Error{Type: ErrorType(KindCommunication), Status: 404, Title: "Not Found", Instance: req.Pointer}}
	case strings.Contains(uri, "findByStatus") || req.Operation == "findPetsByStatus":
		body = json.RawMessage(`[` + string(pet("1")) + `]`)
	case strings.Contains(uri, "/pet/"):
		body = pet(uri[strings.LastIndex(uri, "/")+1:])
	case req.Operation == "getPetById":
		body = pet(string(req.Parameters["petId"]))
	case strings.Contains(uri, "basic-auth"):
		body = json.RawMessage(`{"authenticated":true}`)
	default:
		return Result{Error: &Error{Type: ErrorType(KindCommunication), Status: 500, Title: "unexpected " + uri, Instance: req.Pointer}}
	}
	if req.Output == "response" {
		return Result{Output: json.RawMessage(`{"request":{"method":"GET","uri":"` + uri + `","headers":{}},"headers":{},"statusCode":200,"content":` + string(body) + `}`)}
	}
	return Result{Output: body}
}
