package rules

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// finishedWith is an instance of c that ended status with its steps as
// given ("id": "STATUS").
func finishedWith(c *Definition, status workflow.Status, steps map[string]workflow.StepStatus) *workflow.Instance {
	inst := &workflow.Instance{ID: "orig", Definition: c.Def.Name, Status: status, State: c.Def.InitialState()}
	for id, st := range steps {
		inst.State.Steps[id] = &workflow.StepState{Status: st, Attempts: 1}
		if st == workflow.StepCompleted {
			inst.State.Steps[id].Output = json.RawMessage(`"` + id + `"`)
		}
	}
	return inst
}

// kept lists the steps whose records a re-run keeps (all others PENDING).
func kept(t *testing.T, steps map[string]*workflow.StepState) []string {
	t.Helper()
	var ids []string
	for _, id := range slices.Sorted(maps.Keys(steps)) {
		if st := steps[id]; st.Status != workflow.StepPending {
			ids = append(ids, id+":"+string(st.Status))
		} else if st.Output != nil || st.Attempts != 0 {
			t.Errorf("%s is PENDING with a record left: %+v", id, st)
		}
	}
	return ids
}

// What a re-run from a step keeps: the steps that do not depend on it and
// completed or were skipped; everything downstream of it, and whatever did
// not complete, starts PENDING.
func TestRerunStepsOfADAG(t *testing.T) {
	c := compileDef(t, `
name: shape
steps:
  - {id: a, type: task, handler: h}
  - {id: b, type: task, handler: h, depends_on: [a]}
  - {id: c, type: task, handler: h, depends_on: [a]}
  - {id: d, type: task, handler: h, depends_on: [b, c]}
  - {id: e, type: task, handler: h, when: 'false'}
  - {id: f, type: task, handler: h}
  - {id: g, type: task, handler: h, depends_on: [f]}
`)
	done := map[string]workflow.StepStatus{"a": "COMPLETED", "b": "COMPLETED", "c": "COMPLETED", "d": "COMPLETED", "e": "SKIPPED", "f": "COMPLETED", "g": "COMPLETED"}
	failed := map[string]workflow.StepStatus{"a": "COMPLETED", "b": "COMPLETED", "c": "FAILED", "d": "PENDING", "e": "SKIPPED", "f": "COMPLETED", "g": "CANCELLED"}
	for _, tc := range []struct {
		name   string
		status workflow.Status
		steps  map[string]workflow.StepStatus
		from   string
		want   string
	}{
		{"from the root", workflow.StatusCompleted, done, "a", "e:SKIPPED f:COMPLETED g:COMPLETED"},
		{"from one side of the diamond", workflow.StatusCompleted, done, "b", "a:COMPLETED c:COMPLETED e:SKIPPED f:COMPLETED g:COMPLETED"},
		{"from the join", workflow.StatusCompleted, done, "d", "a:COMPLETED b:COMPLETED c:COMPLETED e:SKIPPED f:COMPLETED g:COMPLETED"},
		{"from a skipped step", workflow.StatusCompleted, done, "e", "a:COMPLETED b:COMPLETED c:COMPLETED d:COMPLETED f:COMPLETED g:COMPLETED"},
		{"a failed run: what did not complete runs again", workflow.StatusFailed, failed, "g", "a:COMPLETED b:COMPLETED e:SKIPPED f:COMPLETED"},
		{"a cancelled run", workflow.StatusCancelled, failed, "b", "a:COMPLETED e:SKIPPED f:COMPLETED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			orig := finishedWith(c, tc.status, tc.steps)
			steps, err := RerunSteps(c, orig, RerunStart{From: tc.from})
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(kept(t, steps), " "); got != tc.want {
				t.Errorf("kept %q, want %q", got, tc.want)
			}
			if len(steps) != len(c.Def.Steps) {
				t.Errorf("%d step records, want one per step (%d)", len(steps), len(c.Def.Steps))
			}
			// The re-run's records are its own: the original is unchanged.
			steps["a"].Output = json.RawMessage(`"changed"`)
			if string(orig.State.Steps["a"].Output) != `"a"` {
				t.Errorf("the re-run's records share the original's")
			}
		})
	}
}

// A re-run of a code workflow keeps the COMPLETED entries before the seq;
// its first run numbers new entries after them.
func TestRerunStepsOfACodeWorkflow(t *testing.T) {
	c := compileDef(t, "name: order\ncode: {handler: order}\n")
	orig := &workflow.Instance{ID: "orig", Definition: "order", Status: workflow.StatusFailed, State: workflow.State{Steps: map[string]*workflow.StepState{}}}
	for i, e := range []struct {
		name   string
		status workflow.StepStatus
		kind   string
	}{{"one", "COMPLETED", KindStep}, {"nap", "COMPLETED", KindSleep}, {"two", "FAILED", KindStep}, {"three", "COMPLETED", KindStep}} {
		st := &workflow.StepState{Status: e.status, Output: json.RawMessage(`1`), Extra: entryExtra(e.kind, i+1)}
		if e.kind == KindSleep {
			st.Extra["finished"] = json.RawMessage(`1`)
		}
		orig.State.Steps[e.name] = st
	}
	setCodeRuns(&orig.State, CodeRuns{Run: 3, Seq: 4, Finished: 1, Error: "boom"})
	for _, tc := range []struct {
		seq  int
		want string
	}{{1, ""}, {3, "nap:COMPLETED one:COMPLETED"}, {4, "nap:COMPLETED one:COMPLETED"}, {9, "nap:COMPLETED one:COMPLETED three:COMPLETED"}} {
		steps, err := RerunSteps(c, orig, RerunStart{FromSeq: tc.seq})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(kept(t, steps), " "); got != tc.want {
			t.Errorf("from seq %d kept %q, want %q", tc.seq, got, tc.want)
		}
	}
	steps, _ := RerunSteps(c, orig, RerunStart{FromSeq: 3})
	inst := &workflow.Instance{ID: "again", Definition: "order", State: workflow.State{Steps: steps}}
	ch, err := testEnv().Start(c, inst, t0)
	if err != nil {
		t.Fatal(err)
	}
	r, err := codeRuns(inst.State)
	if err != nil || r != (CodeRuns{Run: 1, Seq: 2, Finished: 1}) || len(ch.Insert) != 1 {
		t.Errorf("the re-run starts with runs %+v (%v) and %d tasks, want run 1 after seq 2 and one run task", r, err, len(ch.Insert))
	}
}

// What cannot be re-run, and a start that does not fit the workflow.
func TestRerunStepsRefuses(t *testing.T) {
	dag := compileDef(t, "name: pair\nsteps:\n  - {id: a, type: task, handler: h}\n  - {id: b, type: task, handler: h, depends_on: [a]}\n")
	code := compileDef(t, "name: order\ncode: {handler: order}\n")
	for _, tc := range []struct {
		name string
		c    *Definition
		st   workflow.Status
		at   RerunStart
		is   error
		msg  string
	}{
		{"running", dag, workflow.StatusRunning, RerunStart{From: "a"}, ErrNotRerunnable, "orig is RUNNING: only a finished workflow"},
		{"paused", dag, workflow.StatusPaused, RerunStart{From: "a"}, ErrNotRerunnable, "is PAUSED"},
		{"queued", dag, workflow.StatusQueued, RerunStart{From: "a"}, ErrNotRerunnable, "is QUEUED"},
		{"unknown step", dag, workflow.StatusCompleted, RerunStart{From: "z"}, store.ErrInvalidArgument, `definition pair has no step "z" (its steps: a, b)`},
		{"a seq of a DAG", dag, workflow.StatusCompleted, RerunStart{FromSeq: 2}, store.ErrInvalidArgument, `give "from"`},
		{"a step of code", code, workflow.StatusCompleted, RerunStart{From: "a"}, store.ErrInvalidArgument, `give "from_seq"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			orig := &workflow.Instance{ID: "orig", Status: tc.st, State: tc.c.Def.InitialState()}
			_, err := RerunSteps(tc.c, orig, tc.at)
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("err = %v, want %v with %q", err, tc.is, tc.msg)
			}
		})
	}
}
