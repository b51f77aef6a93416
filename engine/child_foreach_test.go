package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/workflow"
)

// A foreach workflow step starts one child per item, at most
// max_concurrency at a time; each child names its item's index, the
// parent's state lists them in item order and the step's output is theirs
// in item order.
func TestForeachStartsAChildPerItem(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{handlers: map[string]engine.Handler{"echo": echo}})
		n.define(lineDef)
		n.define(`
name: lines
steps:
  - {id: lines, type: workflow, definition: line, foreach: .input.skus, max_concurrency: 2, input: {sku: "{{ .item }}", qty: "{{ .index }}"}}
`)
		n.start("lines", "ls", `{"skus": ["a", "b", "c", "d"]}`)
		done := n.waitStatus("ls", workflow.StatusCompleted, 30*time.Second)
		if got, want := output(t, done, "lines"), `[{"total":{"sku":"a"}},{"total":{"sku":"b"}},{"total":{"sku":"c"}},{"total":{"sku":"d"}}]`; got != want {
			t.Fatalf("lines output %s, want %s", got, want)
		}
		var ids []string
		if err := json.Unmarshal(done.State.Steps["lines"].Extra["children"], &ids); err != nil || len(ids) != 4 {
			t.Fatalf("state.steps.lines.children = %s (%v)", done.State.Steps["lines"].Extra["children"], err)
		}
		kids := n.children("ls")
		if len(kids) != 4 {
			t.Fatalf("%d children, want 4", len(kids))
		}
		for _, k := range kids {
			p := k.Parent
			if p == nil || p.Index == nil || ids[*p.Index] != k.ID || p.Step != "lines" {
				t.Fatalf("child %s: parent %+v, children %v", k.ID, p, ids)
			}
			if want := `{"qty":` + string(rune('0'+*p.Index)) + `,"sku":"` + string(rune('a'+*p.Index)) + `"}`; string(k.Input) != want {
				t.Errorf("child %d input %s, want %s", *p.Index, k.Input, want)
			}
		}
		n.checkHistory(done)
	})
}

// A child that fails for good fails its iteration, and with it the step:
// the children of the other iterations still running are cancelled.
func TestForeachChildFailureCancelsTheOtherChildren(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		release := make(chan struct{})
		t.Cleanup(func() { close(release) })
		n := newNode(t, b, b.newDB(t), nodeOpts{workers: 6, handlers: map[string]engine.Handler{
			"work": func(ctx context.Context, task engine.Task) (json.RawMessage, error) {
				var v string
				_ = json.Unmarshal(task.Input, &v)
				if v == "bad" {
					return nil, engine.Permanent(errors.New("bad item"))
				}
				select {
				case <-release:
				case <-ctx.Done():
				}
				return task.Input, nil
			},
		}})
		n.define(`
name: item
steps:
  - {id: work, type: task, handler: work, input: "{{ .input }}"}
`)
		n.define(`
name: items
steps:
  - {id: each, type: workflow, definition: item, foreach: .input, input: "{{ .item }}", retry: {max_attempts: 1}}
`)
		n.start("items", "its", `["slow-0", "bad", "slow-2"]`)
		failed := n.waitStatus("its", workflow.StatusFailed, 30*time.Second)
		if st := failed.State.Steps["each"]; st.Status != workflow.StepFailed {
			t.Fatalf("step each is %s (%s)", st.Status, st.Error)
		}
		for _, k := range n.children("its") {
			want := workflow.StatusCancelled
			if k.Parent != nil && k.Parent.Index != nil && *k.Parent.Index == 1 {
				want = workflow.StatusFailed
			}
			n.waitStatus(k.ID, want, 30*time.Second)
		}
	})
}
