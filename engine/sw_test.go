package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/workflow"
)

// Serverless Workflow documents run on the engine: their tasks' handlers,
// timers, events and children are ordinary task rows, and each finished
// task is one version of the instance.

const swOrder = `
document: {dsl: '1.0.0', namespace: test, name: sw-order, version: '1.0.0'}
do:
  - price:
      call: pricer
      with:
        sku: ${ .sku }
        qty: ${ .qty }
  - check:
      switch:
        - big:
            when: .total > 100
            then: discount
        - small:
            then: label
  - discount:
      set:
        total: ${ .total * 0.9 }
        discounted: true
  - label:
      for:
        each: tag
        in: $workflow.input.tags // ["none"]
      do:
        - add:
            set:
              total: ${ .total }
              discounted: ${ .discounted // false }
              labels: ${ (.labels // []) + [ $tag ] }
`

func pricer(_ context.Context, t engine.Task) (json.RawMessage, error) {
	var in struct {
		SKU string
		Qty int
	}
	if err := json.Unmarshal(t.Input, &in); err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{"total": in.Qty * 50})
}

func swNode(t *testing.T, b backend, handlers map[string]engine.Handler, docs ...string) *node {
	t.Helper()
	n := newNode(t, b, b.newDB(t), nodeOpts{handlers: handlers})
	for _, d := range docs {
		n.define(d)
	}
	return n
}

// causes returns the history causes of an instance from version 1 on.
func (n *node) causes(inst *workflow.Instance) []string {
	n.t.Helper()
	var out []string
	for _, h := range n.checkHistory(inst)[1:] {
		out = append(out, h.Cause)
	}
	return out
}

func TestServerlessWorkflowRunsTasksInOrder(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := swNode(t, b, map[string]engine.Handler{"pricer": pricer}, swOrder)
		n.start("sw-order", "big", `{"sku":"a","qty":3}`)
		inst := n.waitStatus("big", workflow.StatusCompleted, 20*time.Second)
		if got, want := string(inst.Output), `{"discounted":true,"labels":["none"],"total":135}`; !jsonEqual(got, want) {
			t.Errorf("output = %s, want %s", got, want)
		}
		want := []string{
			"task /do/0/price completed", "task /do/1/check completed", "task /do/2/discount completed",
			"task /do/3/label/do/0/add completed", "task /do/3/label completed",
		}
		if got := finishedCauses(n.causes(inst)); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("causes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if len(inst.State.Steps) != 0 {
			t.Errorf("a finished instance still has pending items: %v", inst.State.Steps)
		}

		n.start("sw-order", "small", `{"sku":"a","qty":1,"tags":["x","y"]}`)
		inst = n.waitStatus("small", workflow.StatusCompleted, 20*time.Second)
		if got, want := string(inst.Output), `{"discounted":false,"labels":["x","y"],"total":50}`; !jsonEqual(got, want) {
			t.Errorf("output = %s, want %s", got, want)
		}
		for _, c := range n.causes(inst) {
			if strings.Contains(c, "discount ") {
				t.Errorf("the switch's jump ran discount: %q", c)
			}
		}
	})
}

// finishedCauses keeps the causes of finished tasks.
func finishedCauses(causes []string) []string {
	var out []string
	for _, c := range causes {
		if strings.HasPrefix(c, "task ") && (strings.HasSuffix(c, " completed") || strings.Contains(c, " faulted: ") || strings.HasSuffix(c, " skipped")) {
			out = append(out, c)
		}
	}
	return out
}

func jsonEqual(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

const swRaise = `
document: {dsl: '1.0.0', namespace: test, name: sw-raise, version: '1.0.0'}
do:
  - first:
      set: {a: 1}
  - refuse:
      raise:
        error:
          type: https://example.com/errors/refused
          status: 422
          title: Refused
          detail: ${ "a was \(.a)" }
`

// An uncaught error fails the instance with the DSL error object, which
// the API shows; such an instance cannot be retried, and its tasks cannot
// be completed through the API.
func TestServerlessWorkflowFaultsWithError(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := swNode(t, b, nil, swRaise)
		n.start("sw-raise", "r", `{}`)
		inst := n.waitStatus("r", workflow.StatusFailed, 20*time.Second)
		inst.ShowError()
		want := `{"type":"https://example.com/errors/refused","status":422,"title":"Refused","detail":"a was 1","instance":"/do/1/refuse"}`
		if !jsonEqual(string(inst.Error), want) {
			t.Errorf("error = %s, want %s", inst.Error, want)
		}
		if got := finishedCauses(n.causes(inst)); len(got) != 2 || got[1] != "task /do/1/refuse faulted: Refused: a was 1" {
			t.Errorf("causes = %q", got)
		}
		_, err := n.eng.Action(t.Context(), "r", "retry")
		if !errors.Is(err, engine.ErrActionNotAllowed) || !strings.Contains(err.Error(), "Serverless Workflow") {
			t.Errorf("retry: %v, want ErrActionNotAllowed naming Serverless Workflow", err)
		}
	})
}

const swTry = `
document: {dsl: '1.0.0', namespace: test, name: sw-try, version: '1.0.0'}
do:
  - attempt:
      try:
        - call:
            call: flaky
            with: {n: 1}
      catch:
        errors:
          with:
            type: https://serverlessworkflow.io/spec/1.0.0/errors/runtime
        as: failure
        retry:
          delay: {milliseconds: 1}
          limit:
            attempt: {count: 3}
`

// A handler's failure is a runtime error the document's try/catch retries;
// each attempt of the handler is a new task.
func TestServerlessWorkflowRetriesAFailingHandler(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		var calls atomic.Int32
		flaky := func(_ context.Context, t engine.Task) (json.RawMessage, error) {
			if calls.Add(1) < 3 {
				return nil, errors.New("not yet")
			}
			return json.RawMessage(`{"ok":true}`), nil
		}
		n := swNode(t, b, map[string]engine.Handler{"flaky": flaky}, swTry)
		n.start("sw-try", "t", `{}`)
		inst := n.waitStatus("t", workflow.StatusCompleted, 20*time.Second)
		if got := calls.Load(); got != 3 {
			t.Errorf("the handler ran %d times, want 3", got)
		}
		if !jsonEqual(string(inst.Output), `{"ok":true}`) {
			t.Errorf("output = %s", inst.Output)
		}
	})
}

const swListen = `
document: {dsl: '1.0.0', namespace: test, name: sw-listen, version: '1.0.0'}
do:
  - paid:
      listen:
        to:
          one:
            with:
              type: com.example.paid
              subject: order-7
  - done:
      set:
        amount: ${ .[0].amount }
`

const swEmit = `
document: {dsl: '1.0.0', namespace: test, name: sw-emit, version: '1.0.0'}
do:
  - pay:
      emit:
        event:
          with:
            source: https://example.com/pay
            type: com.example.paid
            subject: ${ .order }
            data:
              amount: ${ .amount }
`

// emit publishes a flowd event that a listening instance receives.
func TestServerlessWorkflowEmitAndListen(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := swNode(t, b, nil, swListen, swEmit)
		n.start("sw-listen", "l", `{}`)
		n.start("sw-emit", "e", `{"order":"order-7","amount":12}`)
		emitted := n.waitStatus("e", workflow.StatusCompleted, 20*time.Second)
		var ce map[string]any
		if err := json.Unmarshal(emitted.Output, &ce); err != nil || ce["type"] != "com.example.paid" || ce["specversion"] != "1.0" {
			t.Errorf("emit output = %s (%v)", emitted.Output, err)
		}
		inst := n.waitStatus("l", workflow.StatusCompleted, 20*time.Second)
		if !jsonEqual(string(inst.Output), `{"amount":12}`) {
			t.Errorf("listen output = %s", inst.Output)
		}
	})
}

const swParent = `
document: {dsl: '1.0.0', namespace: test, name: sw-parent, version: '1.0.0'}
do:
  - child:
      run:
        workflow:
          namespace: test
          name: sw-child
          version: '1.0.0'
          input:
            n: ${ .n }
`

const swChild = `
document: {dsl: '1.0.0', namespace: test, name: sw-child, version: '1.0.0'}
do:
  - double:
      set:
        doubled: ${ .n * 2 }
`

// run: workflow starts a child instance whose output is the task's.
func TestServerlessWorkflowRunsAChild(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := swNode(t, b, nil, swChild, swParent)
		n.start("sw-parent", "p", `{"n":21}`)
		inst := n.waitStatus("p", workflow.StatusCompleted, 20*time.Second)
		if !jsonEqual(string(inst.Output), `{"doubled":42}`) {
			t.Errorf("output = %s", inst.Output)
		}
		kids := n.children("p")
		if len(kids) != 1 || kids[0].Definition != "sw-child" || kids[0].Status != workflow.StatusCompleted {
			t.Errorf("children = %v", kids)
		}
	})
}

// A document is validated when it is stored: every problem is listed, and
// it must be stored under its own name.
func TestServerlessWorkflowDefinitions(t *testing.T) {
	n := swNode(t, backends[0], nil)
	_, _, err := n.eng.PutDefinition(t.Context(), []byte(`
document: {dsl: '1.0.0', namespace: test, name: bad, version: '1.0.0'}
do:
  - build:
      run:
        container:
          image: alpine
  - jump:
      set: {a: 1}
      then: nowhere
`))
	var de *workflow.DefinitionError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "/do/0/build") || !strings.Contains(err.Error(), "/do/1/jump") {
		t.Fatalf("PUT of a bad document: %v, want problems at /do/0/build and /do/1/jump", err)
	}
	if _, _, err := n.eng.PutDefinitionAs(t.Context(), "other", []byte(swChild)); !errors.As(err, &de) || !strings.Contains(err.Error(), "/document/name") {
		t.Errorf("PUT under another name: %v", err)
	}
	info, created, err := n.eng.PutDefinition(t.Context(), []byte(swChild))
	if err != nil || !created || info.Name != "sw-child" {
		t.Fatalf("PUT: %v %v %+v", err, created, info)
	}
	if _, created, err := n.eng.PutDefinition(t.Context(), []byte(swChild)); err != nil || created {
		t.Errorf("the same document again: created %v, %v", created, err)
	}
	got, err := n.eng.GetDefinition(t.Context(), "sw-child", 0)
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := json.Marshal(got.Definition)
	if !strings.Contains(string(doc), `"document"`) || !strings.Contains(string(doc), `"double"`) {
		t.Errorf("GET shows %s, want the document", doc)
	}
}

// A client's copy of a revision reads back what the API wrote, in either
// language.
func TestDefinitionInfoJSONRoundTrip(t *testing.T) {
	n := swNode(t, backends[0], nil, swChild, chainDef)
	for _, name := range []string{"sw-child", "chain"} {
		info, err := n.eng.GetDefinition(t.Context(), name, 0)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := json.Marshal(info)
		if err != nil {
			t.Fatal(err)
		}
		var back engine.DefinitionInfo
		if err := json.Unmarshal(raw, &back); err != nil {
			t.Fatal(err)
		}
		again, _ := json.Marshal(&back)
		if string(again) != string(raw) || back.Definition.Name != name {
			t.Errorf("%s: %s\nread back as %s", name, raw, again)
		}
	}
}

// The document's timeout is the instance's deadline: past it, an instance
// still waiting is TIMED_OUT.
func TestServerlessWorkflowTimeout(t *testing.T) {
	n := swNode(t, backends[0], nil, `
document: {dsl: '1.0.0', namespace: test, name: sw-timeout, version: '1.0.0'}
timeout:
  after: {milliseconds: 100}
do:
  - never:
      listen:
        to:
          one:
            with: {type: com.example.never}
`)
	inst := n.start("sw-timeout", "late", `{}`)
	if inst.Deadline == nil {
		t.Fatalf("no deadline: %+v", inst)
	}
	n.waitStatus("late", workflow.StatusTimedOut, 20*time.Second)
}
