package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

var stepTests = []conformanceTest{
	{"CompleteStep_ok", testCompleteStepOK},
	{"CompleteStep_output", testCompleteStepOutput},
	{"CompleteStep_conflict", testCompleteStepConflict},
	{"CompleteStep_unknownStep", testCompleteStepUnknownStep},
	{"CompleteStep_alreadyCompleted", testCompleteStepAlreadyCompleted},
	{"CompleteStep_terminal", testCompleteStepTerminal},
	{"CompleteStep_notFound", testCompleteStepNotFound},
	{"CompleteStep_precedence", testCompleteStepPrecedence},
	{"CompleteStep_anyLiveStatus", testCompleteStepAnyLiveStatus},
}

var hostileTests = []conformanceTest{
	{"HostileStepIDs_rejectedInState", testHostileStepIDsRejectedInState},
	{"HostileStepIDs_completeStep", testHostileStepIDsCompleteStep},
	{"HostileStepIDs_literalKeys", testHostileStepIDsLiteralKeys},
	{"HostileInstanceIDs_notFound", testHostileInstanceIDsNotFound},
}

// stepState has steps in every interesting condition.
func stepState() workflow.State {
	return workflow.State{
		Variables: map[string]json.RawMessage{"v": json.RawMessage(`1`)},
		Steps: map[string]*workflow.StepState{
			"a": {Status: workflow.StepRunning, Error: "previous attempt failed", Attempts: 2,
				Extra: map[string]json.RawMessage{"custom": json.RawMessage(`{"k":1}`)}},
			"b":   {Status: workflow.StepPending},
			"c":   {Status: workflow.StepCompleted, Output: json.RawMessage(`{"x":1}`), Attempts: 1},
			"w":   {Status: workflow.StepWaiting},
			"f":   {Status: workflow.StepFailed, Error: "gave up", Attempts: 3},
			"a.b": {Status: workflow.StepWaiting},
		},
		Extra: map[string]json.RawMessage{"meta": json.RawMessage(`{"m":true}`)},
	}
}

// completed returns s with step id completed as workflow.State.CompleteStep
// does it: the semantics a step completion must have.
func completed(t testing.TB, s workflow.State, id string, output json.RawMessage) workflow.State {
	t.Helper()
	c := s.Clone()
	if err := c.CompleteStep(id, output); err != nil {
		t.Fatalf("workflow.State.CompleteStep(%q): %v", id, err)
	}
	return c
}

func (b *bundle) completeStep(id, step string, version int64, output string) (*workflow.Instance, error) {
	var out json.RawMessage
	if output != "" {
		out = json.RawMessage(output)
	}
	return CompleteStep(b.ctx, b.s, StepParams{ID: id, StepID: step, Output: out, ExpectedVersion: version})
}

func testCompleteStepOK(t *testing.T, h Harness) {
	b := setup(t, h)
	inst := b.create(t, store.CreateParams{Definition: "d", Status: workflow.StatusRunning, State: stepState()})
	now := b.clock.Advance(2 * time.Second)
	got, err := b.completeStep(inst.ID, "a", 0, bigDoc)
	if err != nil {
		t.Fatalf("CompleteStep: %v", err)
	}
	wantState := completed(t, stepState(), "a", json.RawMessage(bigDoc))
	if st := got.State.Steps["a"]; st == nil || st.Status != workflow.StepCompleted || st.Error != "" || st.Attempts != 2 {
		t.Errorf("step a = %+v; want COMPLETED, error cleared, attempts kept", st)
	}
	want := withVersion(inst, now, workflow.StatusRunning, wantState)
	assertInstance(t, "CompleteStep result", want, got)
	assertInstance(t, "Get after CompleteStep", want, b.get(t, inst.ID))
	assertHistory(t, "History", []store.HistoryEntry{
		{Version: 0, Status: workflow.StatusRunning, State: stepState(), At: store.Timestamp(clockStart), Cause: "create"},
		{Version: 1, Status: workflow.StatusRunning, State: wantState, At: store.Timestamp(now), Cause: `complete step "a"`},
	}, b.history(t, inst.ID))

	// A second step, with a custom cause; the instance status never changes,
	// even when every step is done.
	now = b.clock.Advance(time.Second)
	got, err = CompleteStep(b.ctx, b.s, StepParams{ID: inst.ID, StepID: "w", Output: json.RawMessage(`"approved"`), ExpectedVersion: 1, Cause: "approval"})
	if err != nil {
		t.Fatalf("second CompleteStep: %v", err)
	}
	wantState = completed(t, wantState, "w", json.RawMessage(`"approved"`))
	want = withVersion(want, now, workflow.StatusRunning, wantState)
	assertInstance(t, "second CompleteStep", want, got)
	if hist := b.history(t, inst.ID); len(hist) != 3 || hist[2].Cause != "approval" {
		t.Errorf("history = %d rows, last cause %q; want 3 rows, \"approval\"", len(hist), hist[len(hist)-1].Cause)
	}
	for _, id := range []string{"b", "f", "a.b"} {
		if got, err = b.completeStep(inst.ID, id, got.Version, `1`); err != nil {
			t.Fatalf("CompleteStep(%s): %v", id, err)
		}
	}
	if got.Status != workflow.StatusRunning {
		t.Errorf("after completing every step the status is %s, want RUNNING (CompleteStep never changes it)", got.Status)
	}
}

func testCompleteStepOutput(t *testing.T, h Harness) {
	b := setup(t, h)
	for _, c := range []struct{ in, want string }{
		{"", "null"}, {"null", "null"},
		{`"text"`, `"text"`}, {`42`, `42`}, {` [1, {"a": null}] `, `[1,{"a":null}]`}, {`false`, `false`},
		{`{}`, `{}`}, {`9007199254740993`, `9007199254740993`},
	} {
		inst := b.create(t, store.CreateParams{State: stepState()})
		got, err := b.completeStep(inst.ID, "a", 0, c.in)
		if err != nil {
			t.Errorf("CompleteStep with output %q: %v", c.in, err)
			continue
		}
		for what, st := range map[string]workflow.State{"result": got.State, "Get": b.get(t, inst.ID).State} {
			step := st.Steps["a"]
			if step == nil || step.Output == nil {
				t.Errorf("CompleteStep with output %q: %s has no output key, want %s", c.in, what, c.want)
				continue
			}
			assertJSON(t, fmt.Sprintf("CompleteStep with output %q: %s", c.in, what), []byte(c.want), step.Output)
		}
	}
}

func testCompleteStepConflict(t *testing.T, h Harness) {
	b := setup(t, h)
	inst := b.create(t, store.CreateParams{Status: workflow.StatusRunning, State: stepState()})
	snap := b.snapshot(t, inst.ID)
	for _, v := range []int64{1, 7} {
		got, err := b.completeStep(inst.ID, "a", v, `1`)
		wantConflict(t, fmt.Sprintf("CompleteStep expecting version %d", v), err, inst.ID, v, 0)
		wantNilInstance(t, "CompleteStep with a stale version", got)
	}
	b.unchanged(t, "CompleteStep with a stale version", snap)
}

func testCompleteStepUnknownStep(t *testing.T, h Harness) {
	b := setup(t, h)
	inst := b.create(t, store.CreateParams{Status: workflow.StatusRunning, State: stepState()})
	empty := b.create(t, store.CreateParams{})
	snaps := []snapshot{b.snapshot(t, inst.ID), b.snapshot(t, empty.ID)}
	for _, step := range []string{"nope", "A", "a ", "", "meta", "v", "custom", "x"} {
		got, err := b.completeStep(inst.ID, step, 0, `1`)
		wantErrorIs(t, fmt.Sprintf("CompleteStep(%q)", step), err, workflow.ErrUnknownStep)
		wantNilInstance(t, "CompleteStep of an unknown step", got)
		got, err = b.completeStep(empty.ID, step, 0, `1`)
		wantErrorIs(t, fmt.Sprintf("CompleteStep(%q) on an instance without steps", step), err, workflow.ErrUnknownStep)
		wantNilInstance(t, "CompleteStep of an unknown step", got)
	}
	for _, s := range snaps {
		b.unchanged(t, "CompleteStep of unknown steps", s)
	}
}

func testCompleteStepAlreadyCompleted(t *testing.T, h Harness) {
	b := setup(t, h)
	inst := b.create(t, store.CreateParams{Status: workflow.StatusRunning, State: stepState()})
	snap := b.snapshot(t, inst.ID)
	got, err := b.completeStep(inst.ID, "c", 0, `{"x":"overwritten"}`)
	wantErrorIs(t, "CompleteStep of a completed step", err, workflow.ErrStepCompleted)
	wantNilInstance(t, "CompleteStep of a completed step", got)
	b.unchanged(t, "CompleteStep of a completed step", snap)

	// A step completed through CompleteStep is refused the same way.
	if _, err := b.completeStep(inst.ID, "b", 0, `"first"`); err != nil {
		t.Fatalf("CompleteStep(b): %v", err)
	}
	snap = b.snapshot(t, inst.ID)
	_, err = b.completeStep(inst.ID, "b", 1, `"second"`)
	wantErrorIs(t, "CompleteStep of a step completed before", err, workflow.ErrStepCompleted)
	b.unchanged(t, "CompleteStep of a step completed before", snap)
	assertJSON(t, "output of b", []byte(`"first"`), b.get(t, inst.ID).State.Steps["b"].Output)
}

func testCompleteStepTerminal(t *testing.T, h Harness) {
	b := setup(t, h)
	for _, status := range []workflow.Status{workflow.StatusCompleted, workflow.StatusCancelled} {
		inst := b.create(t, store.CreateParams{Status: workflow.StatusRunning, State: stepState()})
		inst = b.transition(t, inst.ID, workflow.StatusRunning, status)
		snap := b.snapshot(t, inst.ID)
		// Terminal wins over an unknown step, a completed step and a stale version.
		for _, c := range []struct {
			step    string
			version int64
		}{{"a", 1}, {"a", 0}, {"nope", 1}, {"c", 1}, {"c", 5}, {"a,b", 1}} {
			got, err := b.completeStep(inst.ID, c.step, c.version, `1`)
			wantErrorIs(t, fmt.Sprintf("CompleteStep(%s at %d) on a %s instance", c.step, c.version, status), err, workflow.ErrTerminal)
			wantNilInstance(t, "CompleteStep on a terminal instance", got)
		}
		b.unchanged(t, "CompleteStep on a "+string(status)+" instance", snap)
	}
}

func testCompleteStepNotFound(t *testing.T, h Harness) {
	b := setup(t, h)
	for _, step := range []string{"a", "", "a,b"} {
		got, err := b.completeStep("missing", step, 0, `1`)
		wantErrorIs(t, fmt.Sprintf("CompleteStep(missing, %q)", step), err, store.ErrNotFound)
		wantNilInstance(t, "CompleteStep on an unknown id", got)
	}
	b.wantEmpty(t, "CompleteStep on an unknown id")
}

// testCompleteStepPrecedence: 404 (unknown step) before 409 (completed) before
// 412 (version): a request that would fail anyway is not a precondition failure.
func testCompleteStepPrecedence(t *testing.T, h Harness) {
	b := setup(t, h)
	inst := b.create(t, store.CreateParams{Status: workflow.StatusRunning, State: stepState()})
	if _, err := b.completeStep(inst.ID, "b", 0, `1`); err != nil {
		t.Fatalf("CompleteStep: %v", err)
	}
	snap := b.snapshot(t, inst.ID)
	for _, v := range []int64{0, 2} {
		_, err := b.completeStep(inst.ID, "nope", v, `1`)
		wantErrorIs(t, fmt.Sprintf("CompleteStep of an unknown step at stale version %d", v), err, workflow.ErrUnknownStep)
		_, err = b.completeStep(inst.ID, "c", v, `1`)
		wantErrorIs(t, fmt.Sprintf("CompleteStep of a completed step at stale version %d", v), err, workflow.ErrStepCompleted)
		_, err = b.completeStep(inst.ID, "b", v, `1`)
		wantErrorIs(t, fmt.Sprintf("CompleteStep of a step completed at version 1, at stale version %d", v), err, workflow.ErrStepCompleted)
		_, err = b.completeStep(inst.ID, "a", v, `1`)
		wantConflict(t, fmt.Sprintf("CompleteStep of a live step at stale version %d", v), err, inst.ID, v, 1)
	}
	b.unchanged(t, "CompleteStep precedence", snap)
}

func testCompleteStepAnyLiveStatus(t *testing.T, h Harness) {
	b := setup(t, h)
	for _, status := range workflow.Statuses {
		if status.Terminal() {
			continue
		}
		inst := b.create(t, store.CreateParams{Status: status, State: stepState()})
		got, err := b.completeStep(inst.ID, "w", 0, `true`)
		if err != nil {
			t.Errorf("CompleteStep on a %s instance: %v", status, err)
			continue
		}
		if got.Status != status || got.Version != 1 {
			t.Errorf("CompleteStep on a %s instance: status %s, version %d; want %s, 1", status, got.Status, got.Version, status)
		}
	}
}

// hostileStepIDs are not valid step ids: each would write elsewhere, or fail,
// if spliced into SQL or a JSON path.
var hostileStepIDs = []string{
	"a,b", "b}", `"x"`, "{steps}", "{a,b}", "steps,a", `a"]`, "$.x", "$.steps.a", "$[0]", "/steps/a",
	"' OR '1'='1", "a'); DELETE FROM workflow_instances; --", "a b", "a/b", "*", "é", "a\x00b", "\xff",
	"a\nb", `a\b`, "", ".", "..", strings.Repeat("a", 200), strings.Repeat("a", workflow.MaxIDLength+1),
}

// literalStepIDs are valid step ids that a JSON path would misread.
var literalStepIDs = []string{"a.b", "steps", "variables", "status", "output", "0", "-1", "a.", ".a", "_", "--"}

func testHostileStepIDsRejectedInState(t *testing.T, h Harness) {
	b := setup(t, h)
	for _, id := range hostileStepIDs {
		st := workflow.State{Steps: map[string]*workflow.StepState{"a": {Status: workflow.StepPending}, id: {Status: workflow.StepPending}}}
		got, err := b.s.Create(b.ctx, store.CreateParams{State: st})
		wantErrorIs(t, fmt.Sprintf("Create with step id %q", truncate(id)), err, workflow.ErrInvalidState)
		wantNilInstance(t, "Create with a hostile step id", got)
	}
	b.wantEmpty(t, "Create with hostile step ids")

	inst := b.create(t, store.CreateParams{Status: workflow.StatusRunning, State: stepState()})
	snap := b.snapshot(t, inst.ID)
	for _, id := range hostileStepIDs {
		what := fmt.Sprintf("step id %q", truncate(id))
		st := stepState()
		st.Steps[id] = &workflow.StepState{Status: workflow.StepPending}
		_, err := Replace(b.ctx, b.s, inst.ID, 0, st, "hostile")
		wantErrorIs(t, "ReplaceState with "+what, err, workflow.ErrInvalidState)
		_, err = Modify(b.ctx, b.s, inst.ID, func(cur *workflow.Instance) error {
			cur.State.Steps[id] = &workflow.StepState{Status: workflow.StepPending}
			return nil
		}, "hostile")
		wantErrorIs(t, "ModifyState with "+what, err, workflow.ErrInvalidState)
	}
	b.unchanged(t, "writes with hostile step ids", snap)
}

// literalState has steps "a", "b" and every literal step id.
func literalState() workflow.State {
	s := workflow.State{
		Variables: map[string]json.RawMessage{"a": json.RawMessage(`{"b":1}`)},
		Steps: map[string]*workflow.StepState{
			"a": {Status: workflow.StepRunning, Extra: map[string]json.RawMessage{"b": json.RawMessage(`"inner"`)}},
			"b": {Status: workflow.StepPending},
		},
		Extra: map[string]json.RawMessage{"a": json.RawMessage(`{"b":{"status":"x"}}`)},
	}
	for _, id := range literalStepIDs {
		s.Steps[id] = &workflow.StepState{Status: workflow.StepWaiting}
	}
	return s
}

func testHostileStepIDsCompleteStep(t *testing.T, h Harness) {
	b := setup(t, h)
	inst := b.create(t, store.CreateParams{Status: workflow.StatusRunning, State: literalState()})
	snap := b.snapshot(t, inst.ID)
	ids := append(slices.Clone(hostileStepIDs), "a.b.c", "steps.a", "a.b.status", "steps.steps", "x.a")
	for _, id := range ids {
		for _, v := range []int64{0, 3} {
			got, err := b.completeStep(inst.ID, id, v, `{"pwned":true}`)
			wantErrorIs(t, fmt.Sprintf("CompleteStep(%q) at version %d", truncate(id), v), err, workflow.ErrUnknownStep)
			wantNilInstance(t, "CompleteStep of a hostile step id", got)
		}
	}
	b.unchanged(t, "CompleteStep with hostile step ids", snap)
}

func testHostileStepIDsLiteralKeys(t *testing.T, h Harness) {
	b := setup(t, h)
	inst := b.create(t, store.CreateParams{Status: workflow.StatusRunning, State: literalState()})
	want := literalState()
	v := inst.Version
	for _, id := range literalStepIDs {
		out := fmt.Sprintf(`{"completed":%q}`, id)
		got, err := b.completeStep(inst.ID, id, v, out)
		if err != nil {
			t.Errorf("CompleteStep(%q): %v", id, err)
			continue
		}
		v++
		want = completed(t, want, id, json.RawMessage(out))
		// Only state.steps[id] changed: no nested key, no top-level key.
		assertState(t, fmt.Sprintf("state after completing %q", id), want, got.State)
		assertState(t, fmt.Sprintf("stored state after completing %q", id), want, b.get(t, inst.ID).State)
	}
}

// hostileInstanceIDs cannot be instance ids: some are not even text a database
// accepts (NUL, invalid UTF-8). Looking one up is still just "not found", on
// every backend alike: through the API they would otherwise become a 500.
var hostileInstanceIDs = []string{
	"a\x00b", "\xff", "é", "' OR '1'='1", "%", "_", "*", "a b", "", strings.Repeat("a", 200),
}

func testHostileInstanceIDsNotFound(t *testing.T, h Harness) {
	b := setup(t, h)
	// Instances whose ids LIKE patterns or a truncation would match.
	b.create(t, store.CreateParams{ID: "a"})
	b.create(t, store.CreateParams{ID: strings.Repeat("a", workflow.MaxIDLength)})
	snaps := []snapshot{b.snapshot(t, "a"), b.snapshot(t, strings.Repeat("a", workflow.MaxIDLength))}
	var retries atomic.Int64
	for _, id := range hostileInstanceIDs {
		what := func(op string) string { return fmt.Sprintf("%s(%q)", op, truncate(id)) }
		_, err := b.s.Get(b.ctx, id)
		wantErrorIs(t, what("Get"), err, store.ErrNotFound)
		_, err = b.s.History(b.ctx, id, 0, 0)
		wantErrorIs(t, what("History"), err, store.ErrNotFound)
		_, err = Replace(b.ctx, b.s, id, 0, counterState(1), "x")
		wantErrorIs(t, what("ReplaceState"), err, store.ErrNotFound)
		_, err = Modify(b.ctx, b.s, id, func(*workflow.Instance) error { return nil }, "x")
		wantErrorIs(t, what("ModifyState"), err, store.ErrNotFound)
		_, err = Transition(b.ctx, b.s, store.TransitionParams{ID: id, From: workflow.StatusPending, To: workflow.StatusRunning})
		wantErrorIs(t, what("TransitionStatus"), err, store.ErrNotFound)
		_, err = CompleteStep(b.ctx, b.s, StepParams{ID: id, StepID: "a"})
		wantErrorIs(t, what("CompleteStep"), err, store.ErrNotFound)
		_, err = store.UpdateWithRetry(b.ctx, b.s, id, fastPolicy(&retries), increment, "x")
		wantErrorIs(t, what("UpdateWithRetry"), err, store.ErrNotFound)
	}
	for _, s := range snaps {
		b.unchanged(t, "by-id operations with hostile ids", s)
	}
}
