package storetest

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/flowd/flowd/internal/jsondelta"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// History stores what changed between versions, with snapshots from time
// to time; these tests check that every version still reads back exactly,
// from any since, and that the storage stays proportional to the changes.
var historyStorageTests = []conformanceTest{
	{"HistoryStorage_exactStates", testHistoryExactStates},
	{"HistoryStorage_growingState", testHistoryGrowingState},
	{"HistoryStorage_sinceInPatchRuns", testHistorySinceInPatchRuns},
	{"HistoryStorage_applyWithPrior", testHistoryApplyWithPrior},
	{"HistoryStorage_samePolicy", testHistorySamePolicy},
}

// historyWriter writes versions of one instance and keeps each version's
// state as the store returned it, to compare History with.
type historyWriter struct {
	b      *bundle
	inst   *workflow.Instance
	states [][]byte // by version
}

func newHistoryWriter(t *testing.T, b *bundle, s workflow.State) *historyWriter {
	t.Helper()
	w := &historyWriter{b: b, inst: b.create(t, store.CreateParams{State: s})}
	w.record(t)
	return w
}

func (w *historyWriter) record(t *testing.T) {
	t.Helper()
	cur := w.b.get(t, w.inst.ID)
	js, err := cur.State.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(w.states)) != cur.Version {
		t.Fatalf("version %d after %d recorded", cur.Version, len(w.states))
	}
	w.states = append(w.states, js)
	w.inst = cur
}

// replace writes state as the next version.
func (w *historyWriter) replace(t *testing.T, s workflow.State) {
	t.Helper()
	if _, err := Replace(w.b.ctx, w.b.s, w.inst.ID, w.inst.Version, s, "replace"); err != nil {
		t.Fatalf("ReplaceState: %v", err)
	}
	w.record(t)
}

// modify changes the state through ModifyState as the next version.
func (w *historyWriter) modify(t *testing.T, fn func(*workflow.State)) {
	t.Helper()
	if _, err := Modify(w.b.ctx, w.b.s, w.inst.ID, func(i *workflow.Instance) error { fn(&i.State); return nil }, "modify"); err != nil {
		t.Fatalf("ModifyState: %v", err)
	}
	w.record(t)
}

// apply changes the state through Apply as the next version, giving the
// state it was decided on as the write's Prior, as the engine does.
func (w *historyWriter) apply(t *testing.T, fn func(*workflow.State)) {
	t.Helper()
	prior, next := w.inst.State.Clone(), w.inst.State.Clone()
	fn(&next)
	if _, err := w.b.s.Apply(w.b.ctx, &store.Write{ID: w.inst.ID, ExpectedVersion: w.inst.Version, From: w.inst.Status,
		Status: w.inst.Status, State: next, Deadline: w.inst.Deadline, Cause: "apply", Prior: &prior}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	w.record(t)
}

// check reads History from every since with limits 1 and 3 — a page that
// starts at a snapshot, on the first patch after it, in the middle or at the
// end of a run of patches, and one that crosses into the next run — and
// from every fourth since (and the last) with no limit, to the end; it
// compares the states byte for byte (as the state encoder writes them).
// Reading every since to the end read the history's square: minutes of
// SQLite under the race detector for no case the short pages miss.
func (w *historyWriter) check(t *testing.T) {
	t.Helper()
	n := int64(len(w.states))
	for since := int64(0); since < n; since++ {
		limits := []int{1, 3}
		if since%4 == 0 || since == n-1 {
			limits = append(limits, 0)
		}
		for _, limit := range limits {
			page, err := w.b.s.History(w.b.ctx, w.inst.ID, since, limit)
			if err != nil {
				t.Fatalf("History(since %d, limit %d): %v", since, limit, err)
			}
			want := n - since
			if limit > 0 {
				want = min(want, int64(limit))
			}
			if int64(len(page)) != want {
				t.Fatalf("History(since %d, limit %d) = %d versions, want %d", since, limit, len(page), want)
			}
			for i, e := range page {
				v := since + int64(i)
				got, err := e.State.MarshalJSON()
				if err != nil {
					t.Fatal(err)
				}
				if e.Version != v || !bytes.Equal(got, w.states[v]) {
					t.Fatalf("History(since %d, limit %d)[%d] = version %d %s, want version %d %s", since, limit, i, e.Version, got, v, w.states[v])
				}
			}
		}
	}
}

func (w *historyWriter) size(t *testing.T) store.HistorySize {
	t.Helper()
	hs, ok := w.b.s.(store.HistorySizer)
	if !ok {
		t.Fatalf("%T does not measure its history (store.HistorySizer)", w.b.s)
	}
	size, err := hs.HistorySize(w.b.ctx, w.inst.ID)
	if err != nil {
		t.Fatalf("HistorySize: %v", err)
	}
	if size.Versions != int64(len(w.states)) {
		t.Fatalf("HistorySize counts %d versions, want %d", size.Versions, len(w.states))
	}
	return size
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }

// States with JSON nulls (set, kept, removed), arrays that grow and shrink,
// nested objects changed deep inside, numbers spelled differently, and
// keys added before existing ones: each version reads back exactly.
func testHistoryExactStates(t *testing.T, h Harness) {
	b := setup(t, h)
	w := newHistoryWriter(t, b, workflow.State{
		Variables: map[string]json.RawMessage{"n": raw(`null`), "list": raw(`[1,2,3]`), "deep": raw(`{"a":{"b":{"c":1,"d":null}}}`)},
		Steps:     map[string]*workflow.StepState{"m": {Status: workflow.StepPending}},
		Extra:     map[string]json.RawMessage{"meta": raw(`{"x":null}`)},
	})
	w.modify(t, func(s *workflow.State) { s.Variables["added"] = raw(`null`) })
	w.modify(t, func(s *workflow.State) { s.Variables["n"] = raw(`{"now":"an object","with":null}`) })
	w.modify(t, func(s *workflow.State) { s.Variables["list"] = raw(`[1,null,[2,{"k":null}]]`) })
	w.modify(t, func(s *workflow.State) { s.Variables["deep"] = raw(`{"a":{"b":{"c":1,"d":null,"e":[]}}}`) })
	w.modify(t, func(s *workflow.State) { s.Variables["deep"] = raw(`{"a":{"b":{"c":1.0,"e":[]}}}`) })
	w.modify(t, func(s *workflow.State) { s.Variables["deep"] = raw(`{"a":{"b":null}}`) })
	w.modify(t, func(s *workflow.State) { delete(s.Variables, "added"); s.Variables["0first"] = raw(`"é<&>"`) })
	w.modify(t, func(s *workflow.State) {
		s.Steps["a"] = &workflow.StepState{Status: workflow.StepCompleted, Output: raw(`{"z":1,"a":null}`), Attempts: 1}
	})
	w.modify(t, func(s *workflow.State) { s.Steps["a"].Output = raw(`{"z":1,"a":null,"m":[null]}`) })
	w.modify(t, func(s *workflow.State) { s.Extra["meta"] = raw(`null`) })
	w.replace(t, workflow.State{Variables: map[string]json.RawMessage{"only": raw(`null`)}})
	w.replace(t, workflow.State{})
	w.modify(t, func(s *workflow.State) {
		s.Variables = map[string]json.RawMessage{"back": raw(`[{"a":null},{"b":[]}]`)}
	})
	// Status-only versions store no state change at all.
	inst := b.transition(t, w.inst.ID, workflow.StatusPending, workflow.StatusRunning)
	if inst.Version != w.inst.Version+1 {
		t.Fatalf("transition wrote version %d", inst.Version)
	}
	w.record(t)
	w.check(t)
}

// randomHex is n characters of random hexadecimal: values that do not
// compress, as a step's output of random bytes would.
func randomHex(r *rand.Rand, n int) string {
	buf := make([]byte, (n+1)/2)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	return hex.EncodeToString(buf)[:n]
}

// A state that grows by 2 KB per version stores its history in about its
// final size, not in the sum of every version's size (which is about 20×
// the final state here).
func testHistoryGrowingState(t *testing.T, h Harness) {
	b := setup(t, h)
	r := rand.New(rand.NewPCG(7, 8))
	w := newHistoryWriter(t, b, workflow.State{})
	const steps = 40
	var whole int64
	for i := range steps {
		w.modify(t, func(s *workflow.State) {
			if s.Steps == nil {
				s.Steps = map[string]*workflow.StepState{}
			}
			s.Steps[fmt.Sprintf("s%03d", i)] = &workflow.StepState{Status: workflow.StepCompleted,
				Output: raw(`"` + randomHex(r, 2048) + `"`), Attempts: 1}
		})
		whole += int64(len(w.states[len(w.states)-1]))
	}
	size := w.size(t)
	ratio := float64(size.Bytes) / float64(size.StateBytes)
	t.Logf("%d versions, %d snapshots, history %d bytes, final state %d bytes: %.2f× (whole states would be %d bytes)",
		size.Versions, size.Snapshots, size.Bytes, size.StateBytes, ratio, whole)
	if ratio > 3 {
		t.Errorf("history is %.2f× the final state (%d of %d bytes), want at most 3×", ratio, size.Bytes, size.StateBytes)
	}
	if size.Snapshots >= size.Versions/2 {
		t.Errorf("%d of %d versions are snapshots", size.Snapshots, size.Versions)
	}
	w.check(t)
}

// A state of about 16 KB whose 1 KB variables are rewritten again and
// again: the policy takes a snapshot every few versions, and History from
// any since — a snapshot, the first patch after it, the middle or the end
// of a run of patches — gives back the same states.
func testHistorySinceInPatchRuns(t *testing.T, h Harness) {
	b := setup(t, h)
	r := rand.New(rand.NewPCG(9, 10))
	vars := map[string]json.RawMessage{}
	for i := range 16 {
		vars[fmt.Sprintf("v%02d", i)] = raw(`"` + randomHex(r, 1024) + `"`)
	}
	w := newHistoryWriter(t, b, workflow.State{Variables: vars})
	for i := range 60 {
		w.modify(t, func(s *workflow.State) {
			s.Variables[fmt.Sprintf("v%02d", r.IntN(16))] = raw(`"` + randomHex(r, 1024) + `"`)
			if i%7 == 0 {
				s.Variables["n"] = raw(`null`)
			} else {
				delete(s.Variables, "n")
			}
		})
	}
	size := w.size(t)
	t.Logf("%d versions, %d snapshots, history %d bytes, state %d bytes", size.Versions, size.Snapshots, size.Bytes, size.StateBytes)
	// Each version changes about 1 KB of a 16 KB state: with snapshots
	// when the patches since one reach the state's size, that is several
	// snapshots with runs of patches between them.
	if size.Snapshots < 3 || size.Snapshots > size.Versions/4 {
		t.Errorf("%d snapshots in %d versions, want runs of patches between several snapshots", size.Snapshots, size.Versions)
	}
	// Whole states would be about Versions × 16 KB.
	if limit := 5 * size.StateBytes * size.Versions / 16; size.Bytes > limit {
		t.Errorf("history takes %d bytes, want at most %d", size.Bytes, limit)
	}
	w.check(t)
}

// Writes that give the state they were decided on (Write.Prior, the
// engine's writes) store the same exact history as the others: nulls,
// nested values in any key order, numbers spelled differently, keys added
// before existing ones, interleaved with writes that give no Prior.
func testHistoryApplyWithPrior(t *testing.T, h Harness) {
	b := setup(t, h)
	w := newHistoryWriter(t, b, workflow.State{
		Variables: map[string]json.RawMessage{"n": raw(`null`), "deep": raw(`{"a":{"b":{"c":1,"d":null}}}`)},
		Steps:     map[string]*workflow.StepState{"a": {Status: workflow.StepRunning}, "b": {Status: workflow.StepPending}},
	})
	w.apply(t, func(s *workflow.State) { s.Variables["added"] = raw(`{"z":1,"a":[null,{"y":2,"b":1}]}`) })
	w.apply(t, func(s *workflow.State) {
		s.Steps["a"].Status, s.Steps["a"].Attempts, s.Steps["a"].Output = workflow.StepCompleted, 1, raw(`{"z":1,"a":null}`)
	})
	w.modify(t, func(s *workflow.State) { s.Variables["n"] = raw(`{"now":"an object"}`) })
	w.apply(t, func(s *workflow.State) { s.Variables["deep"] = raw(`{"a":{"b":{"c":1.0,"e":[]}}}`) })
	w.apply(t, func(s *workflow.State) { delete(s.Variables, "added"); s.Variables["0first"] = raw(`"é<&>"`) })
	w.apply(t, func(s *workflow.State) { s.Steps["b"].Status = workflow.StepRunning; s.Steps["b"].Error = "x" })
	w.apply(t, func(s *workflow.State) { s.Extra = map[string]json.RawMessage{"meta": raw(`{"k":null}`)} })
	w.check(t)
}

// Every store decides snapshot or patch by jsondelta.Row over the states
// as Go encodes them, so one sequence of writes — small states, a state
// growing past jsondelta.WholeBelow, large states changed a little through
// each kind of write, a status-only version — stores as many snapshots on
// every store as the policy gives for those states.
func testHistorySamePolicy(t *testing.T, h Harness) {
	b := setup(t, h)
	r := rand.New(rand.NewPCG(13, 14))
	w := newHistoryWriter(t, b, workflow.State{Variables: map[string]json.RawMessage{"a": raw(`1`)}})
	w.modify(t, func(s *workflow.State) { s.Variables["a"] = raw(`2`) })
	for i := range 12 {
		set := func(s *workflow.State) {
			s.Variables[fmt.Sprintf("v%02d", i%5)] = raw(`"` + randomHex(r, 1500) + `"`)
		}
		switch i % 3 {
		case 0:
			w.modify(t, set)
		case 1:
			w.apply(t, set)
		default:
			next := w.inst.State.Clone()
			set(&next)
			w.replace(t, next)
		}
	}
	b.transition(t, w.inst.ID, workflow.StatusPending, workflow.StatusRunning)
	w.record(t)

	var rows [][]byte
	var want int64
	for v, st := range w.states {
		var patch func() ([]byte, bool, error)
		if v > 0 {
			old, next := decodeState(t, w.states[v-1]), decodeState(t, st)
			patch = store.HistoryPatchOf(&old, &next, nil)
		}
		row, err := jsondelta.Row(int64(v), len(st), jsondelta.Whole(st), patch, func() ([]byte, error) { return rows[v-1], nil })
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, row)
		if jsondelta.IsSnapshot(row) {
			want++
		}
	}
	size := w.size(t)
	if size.Snapshots != want || want == 1 || want == size.Versions {
		t.Errorf("%d of %d versions stored as snapshots, the policy gives %d", size.Snapshots, size.Versions, want)
	}
	w.check(t)
}

func decodeState(t *testing.T, b []byte) workflow.State {
	t.Helper()
	var s workflow.State
	if err := s.UnmarshalJSON(b); err != nil {
		t.Fatal(err)
	}
	return s
}
