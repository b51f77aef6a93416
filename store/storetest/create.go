package storetest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

var createTests = []conformanceTest{
	{"Create_defaults", testCreateDefaults},
	{"Create_clientID", testCreateClientID},
	{"Create_invalidID", testCreateInvalidID},
	{"Create_exists", testCreateExists},
	{"Create_invalidState", testCreateInvalidState},
	{"Create_invalidStatus", testCreateInvalidStatus},
	{"Create_invalidInput", testCreateInvalidInput},
	{"Create_preservesDocuments", testCreatePreservesDocuments},
	{"Create_history", testCreateHistory},
	{"UnstorableText_keptOrRefused", testUnstorableText},
	{"Get_notFound", testGetNotFound},
	{"Create_withTasks", testCreateWithTasks},
	{"Create_latestRevision", testCreateLatestRevision},
}

func testCreateDefaults(t *testing.T, h Harness) {
	b := setup(t, h)
	now := b.clock.Now()
	inst, err := b.s.Create(b.ctx, store.CreateParams{})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	u, err := uuid.Parse(inst.ID)
	if err != nil {
		t.Errorf("server-generated id %q is not a UUID: %v", inst.ID, err)
	} else if u.Version() != 7 {
		t.Errorf("server-generated id %q is UUID version %d, want 7 (store.NewID)", inst.ID, u.Version())
	}
	if inst.Status != workflow.StatusPending {
		t.Errorf("status = %s, want PENDING", inst.Status)
	}
	if inst.Version != 0 {
		t.Errorf("version = %d, want 0", inst.Version)
	}
	if inst.Definition != "" {
		t.Errorf("definition = %q, want \"\"", inst.Definition)
	}
	assertJSON(t, "input", []byte(`{}`), inst.Input)
	assertState(t, "state", workflow.State{}, inst.State)
	checkTime(t, "created_at", inst.CreatedAt, now)
	checkTime(t, "updated_at", inst.UpdatedAt, now)
	assertInstance(t, "Get after Create", inst, b.get(t, inst.ID))

	// A second server id is different.
	other := b.create(t, store.CreateParams{})
	if other.ID == inst.ID {
		t.Errorf("two creates returned the same server id %q", inst.ID)
	}
}

func testCreateClientID(t *testing.T, h Harness) {
	b := setup(t, h)
	for _, id := range []string{
		"order-1", "A.b_c:d-9", "x", strings.Repeat("z", workflow.MaxIDLength),
	} {
		inst, err := b.s.Create(b.ctx, store.CreateParams{ID: id, Definition: "order"})
		if err != nil {
			t.Errorf("Create(id %q): %v", id, err)
			continue
		}
		if inst.ID != id {
			t.Errorf("Create(id %q) returned id %q", id, inst.ID)
		}
		assertInstance(t, "Get "+id, inst, b.get(t, id))
	}
}

func testCreateInvalidID(t *testing.T, h Harness) {
	b := setup(t, h)
	for _, id := range []string{
		"a b", strings.Repeat("z", workflow.MaxIDLength+1), "é", "a/b", "a\x00b", "' OR '1'='1", ".", "..",
	} {
		inst, err := b.s.Create(b.ctx, store.CreateParams{ID: id})
		wantErrorIs(t, "Create(id "+truncate(id)+")", err, workflow.ErrInvalidID)
		wantNilInstance(t, "Create(id "+truncate(id)+")", inst)
	}
	b.wantEmpty(t, "after invalid ids")
}

func testCreateExists(t *testing.T, h Harness) {
	b := setup(t, h)
	orig := b.create(t, store.CreateParams{
		ID: "dup", Definition: "first", Input: json.RawMessage(`{"n":1}`), State: counterState(1),
	})
	snap := b.snapshot(t, orig.ID)
	b.clock.Advance(1e9)
	inst, err := b.s.Create(b.ctx, store.CreateParams{
		ID: "dup", Definition: "second", Status: workflow.StatusRunning,
		Input: json.RawMessage(`{"n":2}`), State: counterState(2),
	})
	wantErrorIs(t, "second Create", err, store.ErrExists)
	wantNilInstance(t, "second Create", inst)
	b.unchanged(t, "second Create", snap)
}

func testCreateInvalidState(t *testing.T, h Harness) {
	b := setup(t, h)
	cases := map[string]workflow.State{
		"bad step id":         {Steps: map[string]*workflow.StepState{"a b": {Status: workflow.StepPending}}},
		"empty step id":       {Steps: map[string]*workflow.StepState{"": {Status: workflow.StepPending}}},
		"unknown step status": {Steps: map[string]*workflow.StepState{"a": {Status: "DONE"}}},
		"empty step status":   {Steps: map[string]*workflow.StepState{"a": {}}},
		"nil step":            {Steps: map[string]*workflow.StepState{"a": nil}},
		"negative attempts":   {Steps: map[string]*workflow.StepState{"a": {Status: workflow.StepRunning, Attempts: -1}}},
	}
	for name, st := range cases {
		inst, err := b.s.Create(b.ctx, store.CreateParams{ID: "x", State: st})
		wantErrorIs(t, "Create with "+name, err, workflow.ErrInvalidState)
		wantNilInstance(t, "Create with "+name, inst)
	}
	b.wantEmpty(t, "after invalid states")
}

func testCreateInvalidStatus(t *testing.T, h Harness) {
	b := setup(t, h)
	for _, st := range []workflow.Status{workflow.StatusCompleted, workflow.StatusCancelled, "NOPE", "running"} {
		inst, err := b.s.Create(b.ctx, store.CreateParams{Status: st})
		wantErrorIs(t, "Create with status "+string(st), err, store.ErrInvalidArgument)
		wantNilInstance(t, "Create with status "+string(st), inst)
	}
	b.wantEmpty(t, "after invalid statuses")
	// Every other status is a valid initial status.
	for _, st := range workflow.Statuses {
		if st.Terminal() {
			continue
		}
		inst, err := b.s.Create(b.ctx, store.CreateParams{Status: st})
		if err != nil {
			t.Errorf("Create with status %s: %v", st, err)
			continue
		}
		if inst.Status != st {
			t.Errorf("Create with status %s: got %s", st, inst.Status)
		}
	}
}

func testCreateInvalidInput(t *testing.T, h Harness) {
	b := setup(t, h)
	for _, in := range []string{`{`, `{"a":}`, `nope`, `{} {}`} {
		inst, err := b.s.Create(b.ctx, store.CreateParams{Input: json.RawMessage(in)})
		wantErrorIs(t, "Create with input "+in, err, store.ErrInvalidArgument)
		wantNilInstance(t, "Create with input "+in, inst)
	}
	b.wantEmpty(t, "after invalid inputs")
}

// bigDoc holds numbers float64 cannot represent, nesting, unicode and null.
const bigDoc = `{
  "big": 9007199254740993,
  "huge": 123456789012345678901234567890,
  "neg": -9007199254740993,
  "dec": 0.1,
  "nested": {"a": [1, 2, {"b": null, "c": [true, false]}], "s": "héllo ☃ \"q\" \\ /"},
  "empty": {},
  "list": []
}`

func testCreatePreservesDocuments(t *testing.T, h Harness) {
	b := setup(t, h)
	state := workflow.State{
		Variables: map[string]json.RawMessage{
			"big":    json.RawMessage(`9007199254740993`),
			"nested": json.RawMessage(bigDoc),
			"null":   json.RawMessage(`null`),
		},
		Steps: map[string]*workflow.StepState{
			"reserve": {Status: workflow.StepCompleted, Output: json.RawMessage(bigDoc), Attempts: 1,
				Extra: map[string]json.RawMessage{"custom": json.RawMessage(`{"k":[1]}`)}},
			"approve": {Status: workflow.StepFailed, Error: "timed out", Attempts: 3},
			"notify":  {Status: workflow.StepWaiting},
		},
		Extra: map[string]json.RawMessage{
			"meta":  json.RawMessage(`{"owner":"ops","n":9007199254740993}`),
			"flag":  json.RawMessage(`true`),
			"count": json.RawMessage(`12345678901234567890`),
		},
	}
	inst, err := b.s.Create(b.ctx, store.CreateParams{
		ID: "docs", Definition: "order", Status: workflow.StatusRunning,
		Input: json.RawMessage(bigDoc), State: state,
	})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if inst.Status != workflow.StatusRunning || inst.Definition != "order" {
		t.Errorf("status, definition = %s, %q; want RUNNING, \"order\"", inst.Status, inst.Definition)
	}
	assertJSON(t, "Create: input", []byte(bigDoc), inst.Input)
	assertState(t, "Create: state", state, inst.State)
	got := b.get(t, "docs")
	assertJSON(t, "Get: input", []byte(bigDoc), got.Input)
	assertState(t, "Get: state", state, got.State)
	assertInstance(t, "Get after Create", inst, got)

	// Non-object inputs are kept too.
	for _, in := range []string{`[1,"two",3.5]`, `"text"`, `42`} {
		inst := b.create(t, store.CreateParams{Input: json.RawMessage(in)})
		assertJSON(t, "input "+in, []byte(in), b.get(t, inst.ID).Input)
	}
}

func testCreateHistory(t *testing.T, h Harness) {
	b := setup(t, h)
	now := b.clock.Now()
	inst := b.create(t, store.CreateParams{Status: workflow.StatusRunning, State: counterState(7), Cause: "imported"})
	hist := b.history(t, inst.ID)
	want := []store.HistoryEntry{{Version: 0, Status: workflow.StatusRunning, State: counterState(7), At: store.Timestamp(now), Cause: "imported"}}
	assertHistory(t, "History after Create", want, hist)

	plain := b.create(t, store.CreateParams{})
	want = []store.HistoryEntry{{Version: 0, Status: workflow.StatusPending, At: store.Timestamp(now), Cause: "create"}}
	assertHistory(t, "History after Create with the default cause", want, b.history(t, plain.ID))
}

func testGetNotFound(t *testing.T, h Harness) {
	b := setup(t, h)
	b.create(t, store.CreateParams{ID: "exists"})
	for _, id := range []string{"missing", "EXISTS", "exists ", "", "a b", "%"} {
		inst, err := b.s.Get(b.ctx, id)
		wantErrorIs(t, "Get("+id+")", err, store.ErrNotFound)
		wantNilInstance(t, "Get("+id+")", inst)
	}
}

func truncate(s string) string {
	if len(s) > 20 {
		return s[:20] + "…"
	}
	return s
}

// testUnstorableText: valid input that some databases cannot store (NUL or
// invalid UTF-8 in text, \u0000 in a JSON string: PostgreSQL refuses them,
// SQLite does not) is either kept exactly or refused as ErrInvalidArgument,
// never a raw database error (through the API: a 400, not a 500). The
// contract leaves the choice to the backend; a refusal changes nothing.
func testUnstorableText(t *testing.T, h Harness) {
	b := setup(t, h)
	nulState := workflow.State{Variables: map[string]json.RawMessage{"s": json.RawMessage(`"a\u0000b"`)}}
	nulJSON := json.RawMessage(`{"s":"a\u0000b"}`)
	for name, p := range map[string]store.CreateParams{
		"NUL in the definition":           {Definition: "a\x00b"},
		"invalid UTF-8 in the definition": {Definition: "\xff"},
		`\u0000 in the input`:             {Input: nulJSON},
		`\u0000 in the state`:             {State: nulState},
		"NUL in the cause":                {Cause: "a\x00b"},
	} {
		inst, err := b.s.Create(b.ctx, p)
		if err != nil {
			wantErrorIs(t, "Create with "+name, err, store.ErrInvalidArgument)
			continue
		}
		got := b.get(t, inst.ID)
		if got.Definition != p.Definition {
			t.Errorf("Create with %s: definition stored as %q, want %q", name, got.Definition, p.Definition)
		}
		if len(p.Input) > 0 {
			assertJSON(t, "Create with "+name, p.Input, got.Input)
		}
		assertState(t, "Create with "+name, p.State, got.State)
	}

	inst := b.create(t, store.CreateParams{Status: workflow.StatusRunning, State: stepState()})
	nulSteps := stepState()
	nulSteps.Variables["s"] = json.RawMessage(`"a\u0000b"`)
	if got, err := Replace(b.ctx, b.s, inst.ID, inst.Version, nulSteps, "nul"); err != nil {
		wantErrorIs(t, `ReplaceState with \u0000`, err, store.ErrInvalidArgument)
		wantNilInstance(t, `ReplaceState with \u0000`, got)
	} else {
		assertState(t, `ReplaceState with \u0000`, nulSteps, b.get(t, inst.ID).State)
		inst = got
	}
	if got, err := b.completeStep(inst.ID, "w", inst.Version, string(nulJSON)); err != nil {
		wantErrorIs(t, `CompleteStep with \u0000 in the output`, err, store.ErrInvalidArgument)
		wantNilInstance(t, `CompleteStep with \u0000 in the output`, got)
	} else {
		assertJSON(t, `CompleteStep with \u0000 in the output`, nulJSON, b.get(t, inst.ID).State.Steps["w"].Output)
	}
	for _, def := range []string{"a\x00b", "\xff"} {
		if _, err := b.s.List(b.ctx, store.ListParams{Definition: def}); err != nil {
			wantErrorIs(t, fmt.Sprintf("List(definition %q)", def), err, store.ErrInvalidArgument)
		}
	}
}

// The engine starts a workflow with its first tasks in one write.
func testCreateWithTasks(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	now := b.clock.Advance(time.Second)
	first := withID("t-a", newTask("", "a", "q1", now))
	second := newTask("w", "b", store.QueueSleep, now.Add(time.Minute))
	inst, err := b.s.Create(b.ctx, store.CreateParams{ID: "w", Status: workflow.StatusRunning, State: stepState(),
		Tasks: []*store.Task{first, second}, Notify: true})
	if err != nil {
		t.Fatalf("Create with tasks: %v", err)
	}
	assertInstance(t, "Create with tasks", b.get(t, "w"), inst)
	if first.InstanceID != "w" || second.ID == "" {
		t.Errorf("the caller's tasks were not filled in: %+v, %+v", first, second)
	}
	assertTasks(t, "tasks created with the instance", []*store.Task{stored(first, now), stored(second, now)}, b.tasksOf(t, eq, "w"))
	assertTask(t, "the caller's first task", stored(first, now), first)

	// Nothing at all when any part fails.
	for _, tc := range []struct {
		name  string
		id    string
		tasks []*store.Task
		want  error
	}{
		{"existing instance", "w", []*store.Task{newTask("w", "c", "q1", now)}, store.ErrExists},
		{"task of another instance", "x1", []*store.Task{newTask("other", "a", "q1", now)}, store.ErrInvalidArgument},
		{"invalid task", "x2", []*store.Task{{StepID: "a", Queue: "q1", MaxAttempts: 0}}, store.ErrInvalidArgument},
		{"nil task", "x3", []*store.Task{nil}, store.ErrInvalidArgument},
		{"two tasks for one step", "x4", []*store.Task{newTask("", "a", "q1", now), newTask("", "a", "q1", now)}, store.ErrExists},
		{"taken task id", "x5", []*store.Task{withID("t-a", newTask("", "a", "q1", now))}, store.ErrExists},
	} {
		before := b.countAll(t)
		_, err := b.s.Create(b.ctx, store.CreateParams{ID: tc.id, Status: workflow.StatusRunning, Tasks: tc.tasks})
		wantErrorIs(t, "Create with "+tc.name, err, tc.want)
		if tc.name == "taken task id" && err != nil && !strings.Contains(err.Error(), "task") {
			t.Errorf("Create with a taken task id: %q does not say that a task exists", err)
		}
		if n := b.countAll(t); n != before {
			t.Errorf("Create with %s: %d instances, want %d", tc.name, n, before)
		}
		if tasks := b.tasksOf(t, eq, "w"); len(tasks) != 2 {
			t.Errorf("Create with %s: w has %d tasks, want 2", tc.name, len(tasks))
		}
		if tc.id != "w" {
			if tasks := b.tasksOf(t, eq, tc.id); len(tasks) != 0 {
				t.Errorf("Create with %s: %d tasks stored for %s", tc.name, len(tasks), tc.id)
			}
		}
	}
}

// Under LatestRevision an instance is created only while its revision is the
// definition's latest: with or without tasks, nothing is written otherwise.
func testCreateLatestRevision(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	d := b.defs(t)
	b.putDefinition(t, d, "d", `{"v":1}`, 1, true)
	now := b.clock.Now()
	create := func(id string, rev int, latest, withTasks bool) error {
		p := store.CreateParams{ID: id, Definition: "d", DefinitionRevision: rev, LatestRevision: latest, Status: workflow.StatusRunning}
		if withTasks {
			p.Tasks, p.Notify = []*store.Task{newTask("", "a", "q1", now)}, true
		}
		_, err := b.s.Create(b.ctx, p)
		return err
	}
	for _, withTasks := range []bool{false, true} {
		if err := create(fmt.Sprintf("r1-%v", withTasks), 1, true, withTasks); err != nil {
			t.Errorf("Create at the latest revision (tasks %v): %v", withTasks, err)
		}
	}
	b.putDefinition(t, d, "d", `{"v":2}`, 2, true)
	for _, withTasks := range []bool{false, true} {
		id := fmt.Sprintf("stale-%v", withTasks)
		before := b.countAll(t)
		err := create(id, 1, true, withTasks)
		wantErrorIs(t, fmt.Sprintf("Create at an older revision (tasks %v)", withTasks), err, store.ErrConflict)
		wantErrorIs(t, fmt.Sprintf("Create at an older revision (tasks %v)", withTasks), err, store.ErrStaleRevision)
		if err != nil && !strings.Contains(err.Error(), "newer than 1") {
			t.Errorf("Create at an older revision: %q does not say that a newer revision exists", err)
		}
		if n := b.countAll(t); n != before {
			t.Errorf("Create at an older revision: %d instances, want %d", n, before)
		}
		if tasks := b.tasksOf(t, eq, id); len(tasks) != 0 {
			t.Errorf("Create at an older revision: %d tasks stored", len(tasks))
		}
		if err := create(id, 1, false, withTasks); err != nil {
			t.Errorf("Create at an older revision without LatestRevision (tasks %v): %v", withTasks, err)
		}
		if err := create(fmt.Sprintf("r2-%v", withTasks), 2, true, withTasks); err != nil {
			t.Errorf("Create at the new latest revision (tasks %v): %v", withTasks, err)
		}
	}
	wantErrorIs(t, "Create of a taken id at the latest revision", create("r2-false", 2, true, false), store.ErrExists)
	_, err := b.s.Create(b.ctx, store.CreateParams{ID: "free", LatestRevision: true})
	wantErrorIs(t, "Create of a free-form instance with LatestRevision", err, store.ErrInvalidArgument)
}
