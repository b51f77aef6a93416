package storetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// JSON is compared semantically: PostgreSQL's jsonb reorders keys and
// reformats whitespace, so bytes may differ while the document is the same.
// Numbers are compared exactly (as rationals), never through float64, so a
// store that loses 9007199254740993 fails.

// absentJSON stands for a nil json.RawMessage (a key that is not there), as
// opposed to JSON null.
type absentJSON struct{}

// invalidJSON carries bytes that do not parse, so they still compare.
type invalidJSON string

// jsonNumber is a number in canonical rational form ("3", "3/2").
type jsonNumber string

// normJSON decodes raw into a comparable value with exact numbers.
func normJSON(raw []byte) any {
	if len(raw) == 0 {
		return absentJSON{}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return invalidJSON(raw)
	}
	if dec.More() {
		return invalidJSON(raw)
	}
	return canonJSON(v)
}

func canonJSON(v any) any {
	switch x := v.(type) {
	case json.Number:
		r, ok := new(big.Rat).SetString(string(x))
		if !ok {
			return invalidJSON(x)
		}
		return jsonNumber(r.RatString())
	case map[string]any:
		for k, e := range x {
			x[k] = canonJSON(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = canonJSON(e)
		}
		return x
	}
	return v
}

// stateDoc is the comparable form of a state: its JSON document.
func stateDoc(s workflow.State) any {
	b, err := json.Marshal(s)
	if err != nil {
		return invalidJSON(fmt.Sprintf("marshal state: %v", err))
	}
	return normJSON(b)
}

// instanceView is the comparable form of an instance.
type instanceView struct {
	ID         string
	Definition string
	Status     workflow.Status
	State      any
	Input      any
	Version    int64
	CreatedAt  time.Time // compared with time.Time.Equal by cmp
	UpdatedAt  time.Time
	// DefinitionRevision and Deadline are zero for an instance created
	// without them, so every test compares them too.
	DefinitionRevision int
	Deadline           *time.Time // cmp compares the times, with Equal
}

func viewOf(inst *workflow.Instance) *instanceView {
	if inst == nil {
		return nil
	}
	return &instanceView{
		ID: inst.ID, Definition: inst.Definition, Status: inst.Status,
		State: stateDoc(inst.State), Input: normJSON(inst.Input), Version: inst.Version,
		CreatedAt: inst.CreatedAt, UpdatedAt: inst.UpdatedAt,
		DefinitionRevision: inst.DefinitionRevision, Deadline: inst.Deadline,
	}
}

// historyView is the comparable form of a history entry.
type historyView struct {
	Version int64
	Status  workflow.Status
	State   any
	At      time.Time
	Cause   string
}

func historyViews(h []store.HistoryEntry) []historyView {
	out := make([]historyView, len(h))
	for i, e := range h {
		out[i] = historyView{Version: e.Version, Status: e.Status, State: stateDoc(e.State), At: e.At, Cause: e.Cause}
	}
	return out
}

// assertInstance fails t unless got equals want field by field (JSON
// semantically, times with Equal) and got's times are normalised.
func assertInstance(t testing.TB, what string, want, got *workflow.Instance) {
	t.Helper()
	if diff := cmp.Diff(viewOf(want), viewOf(got)); diff != "" {
		t.Errorf("%s: instance mismatch (-want +got):\n%s", what, diff)
	}
	if got != nil {
		checkTimeForm(t, what+": created_at", got.CreatedAt)
		checkTimeForm(t, what+": updated_at", got.UpdatedAt)
		if got.Deadline != nil {
			checkTimeForm(t, what+": deadline", *got.Deadline)
		}
	}
}

// assertState fails t unless the two states are the same JSON document.
func assertState(t testing.TB, what string, want, got workflow.State) {
	t.Helper()
	if diff := cmp.Diff(stateDoc(want), stateDoc(got)); diff != "" {
		t.Errorf("%s: state mismatch (-want +got):\n%s", what, diff)
	}
}

// assertJSON fails t unless the two documents are semantically equal.
func assertJSON(t testing.TB, what string, want, got []byte) {
	t.Helper()
	if diff := cmp.Diff(normJSON(want), normJSON(got)); diff != "" {
		t.Errorf("%s: JSON mismatch (-want +got):\n%s\nwant %s\ngot  %s", what, diff, want, got)
	}
}

// checkTimeForm fails t unless tm is UTC with microsecond precision, the form
// store.Timestamp produces.
func checkTimeForm(t testing.TB, what string, tm time.Time) {
	t.Helper()
	if tm.Location() != time.UTC {
		t.Errorf("%s = %v: location %v, want UTC", what, tm, tm.Location())
	}
	if tm.Nanosecond()%1000 != 0 {
		t.Errorf("%s = %v: not truncated to microseconds", what, tm)
	}
}

// checkTime fails t unless got is the instant store.Timestamp(clock) in UTC.
func checkTime(t testing.TB, what string, got, clock time.Time) {
	t.Helper()
	want := store.Timestamp(clock)
	if !got.Equal(want) {
		t.Errorf("%s = %v, want %v (the injected clock through store.Timestamp)", what, got, want)
	}
	checkTimeForm(t, what, got)
}

// wantErrorIs fails t unless errors.Is(err, target).
func wantErrorIs(t testing.TB, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: error = %v (%T), want errors.Is(err, %q)", what, err, err, target)
	}
}

// wantConflict fails t unless err is a *store.ConflictError with these fields
// (Reason empty: a version mismatch, not a database abort).
func wantConflict(t testing.TB, what string, err error, id string, expected, actual int64) {
	t.Helper()
	var ce *store.ConflictError
	if !errors.As(err, &ce) {
		t.Errorf("%s: error = %v (%T), want a *store.ConflictError", what, err, err)
		return
	}
	want := store.ConflictError{ID: id, Expected: expected, Actual: actual}
	if diff := cmp.Diff(want, *ce); diff != "" {
		t.Errorf("%s: ConflictError mismatch (-want +got):\n%s", what, diff)
	}
	if !errors.Is(err, store.ErrConflict) {
		t.Errorf("%s: errors.Is(err, store.ErrConflict) is false for %v", what, err)
	}
}

// wantMismatch fails t unless err is a *store.StatusMismatchError with these fields.
func wantMismatch(t testing.TB, what string, err error, id string, expected, actual workflow.Status) {
	t.Helper()
	var me *store.StatusMismatchError
	if !errors.As(err, &me) {
		t.Errorf("%s: error = %v (%T), want a *store.StatusMismatchError", what, err, err)
		return
	}
	want := store.StatusMismatchError{ID: id, Expected: expected, Actual: actual}
	if diff := cmp.Diff(want, *me); diff != "" {
		t.Errorf("%s: StatusMismatchError mismatch (-want +got):\n%s", what, diff)
	}
	if !errors.Is(err, store.ErrStatusMismatch) {
		t.Errorf("%s: errors.Is(err, store.ErrStatusMismatch) is false for %v", what, err)
	}
}

// wantNilInstance fails t when a failed operation still returned an instance.
func wantNilInstance(t testing.TB, what string, inst *workflow.Instance) {
	t.Helper()
	if inst != nil {
		t.Errorf("%s: returned instance %+v together with an error, want nil", what, inst)
	}
}

// snapshot is what an instance looked like, to prove a failure changed nothing.
type snapshot struct {
	inst    *workflow.Instance
	history []store.HistoryEntry
}

func (b *bundle) snapshot(t testing.TB, id string) snapshot {
	t.Helper()
	return snapshot{inst: b.get(t, id), history: b.history(t, id)}
}

// unchanged fails t unless the instance and its history are as in snap.
func (b *bundle) unchanged(t testing.TB, what string, snap snapshot) {
	t.Helper()
	inst, err := b.s.Get(b.ctx, snap.inst.ID)
	if err != nil {
		t.Errorf("%s: Get after the failed operation: %v", what, err)
		return
	}
	if diff := cmp.Diff(viewOf(snap.inst), viewOf(inst)); diff != "" {
		t.Errorf("%s: the failed operation changed the instance (-before +after):\n%s", what, diff)
	}
	h, err := b.s.History(b.ctx, snap.inst.ID, 0, 0)
	if err != nil {
		t.Errorf("%s: History after the failed operation: %v", what, err)
		return
	}
	if diff := cmp.Diff(historyViews(snap.history), historyViews(h)); diff != "" {
		t.Errorf("%s: the failed operation changed the history (-before +after):\n%s", what, diff)
	}
}

func (b *bundle) get(t testing.TB, id string) *workflow.Instance {
	t.Helper()
	inst, err := b.s.Get(b.ctx, id)
	if err != nil {
		t.Fatalf("Get(%q): %v", id, err)
	}
	return inst
}

func (b *bundle) history(t testing.TB, id string) []store.HistoryEntry {
	t.Helper()
	h, err := b.s.History(b.ctx, id, 0, 0)
	if err != nil {
		t.Fatalf("History(%q): %v", id, err)
	}
	return h
}

// create is NewInstance on the bundle's store.
func (b *bundle) create(t testing.TB, p store.CreateParams) *workflow.Instance {
	t.Helper()
	return NewInstance(t, b.s, p)
}

// transition moves id along from → to and fails t on error.
func (b *bundle) transition(t testing.TB, id string, from, to workflow.Status) *workflow.Instance {
	t.Helper()
	inst, err := Transition(b.ctx, b.s, store.TransitionParams{ID: id, From: from, To: to})
	if err != nil {
		t.Fatalf("TransitionStatus(%s, %s→%s): %v", id, from, to, err)
	}
	return inst
}

// countAll returns the number of instances in the database (every page).
func (b *bundle) countAll(t testing.TB) int {
	t.Helper()
	n, cursor := 0, ""
	for {
		page, err := b.s.List(b.ctx, store.ListParams{Limit: store.MaxListLimit, Cursor: cursor})
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		n += len(page.Instances)
		if page.NextCursor == "" {
			return n
		}
		cursor = page.NextCursor
	}
}

// wantEmpty fails t unless the database holds no instance at all.
func (b *bundle) wantEmpty(t testing.TB, what string) {
	t.Helper()
	if n := b.countAll(t); n != 0 {
		t.Errorf("%s: the database holds %d instances, want none", what, n)
	}
}

// counterState is a state whose variable "counter" is n, with two steps.
func counterState(n int) workflow.State {
	return workflow.State{
		Variables: map[string]json.RawMessage{"counter": json.RawMessage(fmt.Sprint(n))},
		Steps: map[string]*workflow.StepState{
			"a": {Status: workflow.StepPending},
			"b": {Status: workflow.StepRunning, Attempts: 1},
		},
	}
}

// counter reads variable "counter" of s (-1 when missing or not a number).
func counter(s workflow.State) int {
	var n int
	if ok, err := s.Var("counter", &n); !ok || err != nil {
		return -1
	}
	return n
}

// increment adds 1 to variable "counter".
func increment(s *workflow.State) error {
	var n int
	if _, err := s.Var("counter", &n); err != nil {
		return err
	}
	return s.SetVar("counter", n+1)
}

var errBoom = errors.New("storetest: boom")

// assertHistory fails t unless got is want (JSON semantically, times with
// Equal) and every time is normalised.
func assertHistory(t testing.TB, what string, want, got []store.HistoryEntry) {
	t.Helper()
	if diff := cmp.Diff(historyViews(want), historyViews(got)); diff != "" {
		t.Errorf("%s: history mismatch (-want +got):\n%s", what, diff)
	}
	for _, e := range got {
		checkTimeForm(t, fmt.Sprintf("%s: history version %d: at", what, e.Version), e.At)
	}
}
