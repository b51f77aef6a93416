package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/store/sqlite"
	"github.com/flowd/flowd/workflow"
)

const swSpin = `
document: {dsl: '1.0.0', namespace: test, name: spin, version: '1.0.0'}
do:
  - spin:
      set:
        n: ${ (.n // 0) + 1 }
      then: spin
`

// A Serverless Workflow task that jumps to itself writes versions for ever
// without a limit; with MaxVersions the instance fails at the limit, its
// error naming it, and writes nothing more.
func TestVersionLimitStopsAServerlessLoop(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{maxVersions: 60})
		n.define(swSpin)
		inst := n.waitStatus(n.start("spin", "", "").ID, workflow.StatusFailed, 20*time.Second)
		if inst.Version != 59 {
			t.Errorf("failed at version %d, want 59 (60 versions)", inst.Version)
		}
		inst.ShowError()
		if !strings.Contains(string(inst.Error), "reached --max-versions (60)") {
			t.Errorf("error %s", inst.Error)
		}
		h := n.checkHistory(inst)
		if last := h[len(h)-1]; last.Status != workflow.StatusFailed || !strings.Contains(last.Cause, "--max-versions (60)") {
			t.Errorf("last version: %s %q", last.Status, last.Cause)
		}
		tasks, err := n.st.TasksOfInstance(context.Background(), inst.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range tasks {
			if tk.Status == store.TaskQueued || tk.Status == store.TaskLeased {
				t.Errorf("task %s of step %s is still %s", tk.ID, tk.StepID, tk.Status)
			}
		}
		time.Sleep(200 * time.Millisecond)
		if again := n.waitStatus(inst.ID, workflow.StatusFailed, time.Second); again.Version != inst.Version {
			t.Errorf("version %d after failing, then %d", inst.Version, again.Version)
		}
	})
}

// A flowd step retried without end (a handler that always fails, a huge
// retry budget) stops at the limit too, the step's last error kept.
func TestVersionLimitStopsARetryLoop(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{maxVersions: 31, handlers: map[string]engine.Handler{"fail": failing}})
		n.define("name: retrying\nsteps:\n  - {id: a, type: task, handler: fail, retry: {max_attempts: 1000, initial_backoff: 1ms, max_backoff: 1ms}}\n")
		inst := n.waitStatus(n.start("retrying", "", "").ID, workflow.StatusFailed, 20*time.Second)
		if inst.Version != 30 {
			t.Errorf("failed at version %d, want 30", inst.Version)
		}
		a := inst.State.Steps["a"]
		// A failed attempt is one version (a delivery writes none).
		if a.Status != workflow.StepCancelled || a.Error != "no" || a.Attempts != 30 {
			t.Errorf("step a: %+v", a)
		}
		h := n.checkHistory(inst)
		if last := h[len(h)-1]; !strings.Contains(last.Cause, "reached --max-versions (31)") {
			t.Errorf("last cause %q", last.Cause)
		}
	})
}

func failing(context.Context, engine.Task) (json.RawMessage, error) { return nil, errors.New("no") }

func TestMaxVersionsMustNotBeNegative(t *testing.T) {
	st, err := sqlite.Open(context.Background(), "sqlite:"+t.TempDir()+"/flowd.db", sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := engine.New(engine.Config{Store: st, MaxVersions: -1}); err == nil || !strings.Contains(err.Error(), "MaxVersions must not be negative") {
		t.Errorf("engine.New with MaxVersions -1: %v", err)
	}
}

// A Serverless Workflow whose next state would pass the state limit fails,
// its error naming the limit, instead of staying RUNNING while its tick is
// decided again (and refused) every lease. Each value it builds stays well
// below the limit: the state as a whole passes it.
func TestStateLimitFailsAServerlessWorkflow(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{maxState: 3000, lease: 500 * time.Millisecond})
		n.define(`
document: {dsl: '1.0.0', namespace: test, name: grow, version: '1.0.0'}
do:
  - grow:
      set:
        s: ${ (.s // "") + "0123456789abcdefghijklmnopqrstuvwxyz" }
      then: grow
`)
		n.define(`
document: {dsl: '1.0.0', namespace: test, name: twice, version: '1.0.0'}
do:
  - first:
      set:
        a: ${ "x" * 1000 }
  - loop:
      for: {each: i, in: '${ [.a, .a] }'}
      do:
        - keep:
            set: ${ . }
`)
		// The first task's set alone is too large: the instance stayed
		// RUNNING at version 0.
		n.define(`
document: {dsl: '1.0.0', namespace: test, name: once, version: '1.0.0'}
do:
  - big:
      set:
        a: ${ "x" * 4000 }
`)
		for _, def := range []string{"grow", "twice", "once"} {
			inst := n.waitStatus(n.start(def, "", "").ID, workflow.StatusFailed, 10*time.Second)
			inst.ShowError()
			want := "more than --max-state-bytes (3000)"
			if def == "once" {
				want = "max-state-bytes" // a value larger than the limit may be refused as it is built
			}
			if !strings.Contains(string(inst.Error), want) {
				t.Errorf("%s: error %s", def, inst.Error)
			}
			if err := inst.State.CheckSize(3000); err != nil {
				t.Errorf("%s: the failed state: %v", def, err)
			}
			n.checkHistory(inst)
		}
	})
}

// A recursive child step with a four-item foreach grew without end (to
// ~1.4M workflows); with MaxDescendants the tree stops at exactly that
// many descendants: the instance that would start one more fails, its
// error naming the limit, the failure climbs to the top-level workflow,
// and the rest of the tree is cancelled.
func TestDescendantLimitStopsARecursiveForeach(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{maxDescendants: 30, workers: 8})
		n.define("name: fan\nsteps:\n  - {id: sub, type: workflow, definition: fan, foreach: '[1, 2, 3, 4]'}\n")
		root := n.start("fan", "root", "")
		failed := n.waitStatus(root.ID, workflow.StatusFailed, 20*time.Second)
		n.waitNoneRunning(15 * time.Second)
		all := n.all()
		if len(all) != 31 {
			t.Errorf("%d workflows, want the top-level one and 30 descendants", len(all))
		}
		named := 0
		for _, inst := range all {
			if st := inst.State.Steps["sub"]; st != nil && strings.Contains(st.Error, "top-level workflow root reached --max-descendants (30)") {
				named++
			}
		}
		if named == 0 {
			t.Errorf("no workflow failed naming the limit; the top-level one: %+v", failed.State.Steps["sub"])
		}
		time.Sleep(300 * time.Millisecond)
		if again := n.all(); len(again) != len(all) {
			t.Errorf("%d workflows once stopped, %d later", len(all), len(again))
		}
	})
}

func TestMaxDescendantsMustNotBeNegative(t *testing.T) {
	st, err := sqlite.Open(context.Background(), "sqlite:"+t.TempDir()+"/flowd.db", sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := engine.New(engine.Config{Store: st, MaxDescendants: -1}); err == nil || !strings.Contains(err.Error(), "MaxDescendants must not be negative") {
		t.Errorf("engine.New with MaxDescendants -1: %v", err)
	}
}
