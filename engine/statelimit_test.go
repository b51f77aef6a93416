package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/store/sqlite"
	"github.com/flowd/flowd/workflow"
)

// An in-process handler whose output would make the state larger than
// MaxStateBytes fails its attempt for good, with an error naming the limit:
// the output cannot be stored, and running the handler again would most
// likely return it again. The steps before it keep their outputs.
func TestOversizeHandlerOutputFailsTheStep(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		huge := func(context.Context, engine.Task) (json.RawMessage, error) {
			return json.RawMessage(`"` + strings.Repeat("x", 3000) + `"`), nil
		}
		n := newNode(t, b, b.newDB(t), nodeOpts{maxState: 2000, handlers: map[string]engine.Handler{"huge": huge, "echo": echo}})
		n.define(`
name: huge
steps:
  - {id: a, type: task, handler: echo, input: {k: 1}}
  - {id: b, type: task, handler: huge, depends_on: [a], retry: {max_attempts: 3}}
`)
		inst := n.waitStatus(n.start("huge", "", "").ID, workflow.StatusFailed, 10*time.Second)
		a, bs := inst.State.Steps["a"], inst.State.Steps["b"]
		if a.Status != workflow.StepCompleted || string(a.Output) != `{"k":1}` {
			t.Errorf("the step before: %+v", a)
		}
		if bs.Status != workflow.StepFailed || bs.Attempts != 1 || bs.Output != nil ||
			!strings.Contains(bs.Error, "the handler's output cannot be stored") || !strings.Contains(bs.Error, "more than the limit of 2000 bytes") {
			t.Errorf("the oversize step should fail once, naming the limit: %+v", bs)
		}
		n.checkHistory(inst)
	})
}

func TestMaxStateBytesMustNotBeNegative(t *testing.T) {
	st, err := sqlite.Open(context.Background(), "sqlite:"+t.TempDir()+"/flowd.db", sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := engine.New(engine.Config{Store: st, MaxStateBytes: -1}); err == nil || !strings.Contains(err.Error(), "MaxStateBytes must not be negative") {
		t.Errorf("engine.New with MaxStateBytes -1: %v", err)
	}
}
