package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// Search attributes: stored with the instance's create (or a guarded
// write), shown by Get and List, and filtered on by List together with the
// creation and update times, every combination paging like an unfiltered
// list.

var searchTests = []conformanceTest{
	{"Search_stored", testSearchStored},
	{"Search_listFilters", testSearchListFilters},
	{"Search_invalid", testSearchInvalid},
	{"Search_apply", testSearchApply},
	{"Search_deleted", testSearchDeleted},
	{"Search_times", testListTimes},
}

// testSearchStored: a create's attributes come back from Create, Get and
// List as JSON of their type, a number in its shortest form; an instance
// without any has none.
func testSearchStored(t *testing.T, h Harness) {
	b := setup(t, h)
	in := map[string]json.RawMessage{"customer": raw(`"acme"`), "amount": raw(`42.0`), "vip": raw(`true`), "note": raw(`"a \"quoted\" ü"`), "ratio": raw(`-1.5e3`)}
	want := map[string]json.RawMessage{"customer": raw(`"acme"`), "amount": raw(`42`), "vip": raw(`true`), "note": raw(`"a \"quoted\" ü"`), "ratio": raw(`-1500`)}
	created := b.create(t, store.CreateParams{ID: "with", Search: in})
	plain := b.create(t, store.CreateParams{ID: "without"})
	check := func(what string, got map[string]json.RawMessage, want map[string]json.RawMessage) {
		t.Helper()
		if diff := cmp.Diff(jsonStrings(want), jsonStrings(got)); diff != "" {
			t.Errorf("%s: search (-want +got):\n%s", what, diff)
		}
	}
	check("Create", created.Search, want)
	// Every form of the create stores them: with first tasks, an
	// idempotency key, a concurrency slot, all three.
	now := b.clock.Now()
	for _, p := range []store.CreateParams{
		{ID: "tasks", Status: workflow.StatusRunning, State: stepState(), Tasks: []*store.Task{newTask("tasks", "a", "q1", now)}, Notify: true},
		{ID: "keyed", IdempotencyKey: "key-1", RequestHash: "h"},
		{ID: "slotted", Definition: "d", Status: workflow.StatusRunning, Concurrency: &store.ConcurrencySlot{Key: "k", Limit: 2}},
		{ID: "all", Definition: "d", Status: workflow.StatusRunning, State: stepState(), Tasks: []*store.Task{newTask("all", "a", "q1", now)},
			IdempotencyKey: "key-2", RequestHash: "h", Concurrency: &store.ConcurrencySlot{Key: "k", Limit: 2}},
	} {
		p.Search = in
		if got := b.create(t, p); got.Search == nil {
			t.Errorf("Create %s: no search", p.ID)
		}
		check("Get "+p.ID, b.get(t, p.ID).Search, want)
	}
	check("Get", b.get(t, "with").Search, want)
	check("Create without", plain.Search, nil)
	check("Get without", b.get(t, "without").Search, nil)
	page, err := b.s.List(b.ctx, store.ListParams{})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	for _, inst := range page.Instances {
		switch inst.ID {
		case "without":
			check("List without", inst.Search, nil)
		default:
			check("List "+inst.ID, inst.Search, want)
		}
	}
}

// jsonStrings makes a search map comparable as text (nil for none).
func jsonStrings(m map[string]json.RawMessage) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := map[string]string{}
	for k, v := range m {
		out[k] = string(v)
	}
	return out
}

// searched is an instance of the filter fixture with its attributes as
// text.
type searched struct {
	listed
	attrs   map[string]string
	updated time.Time
}

// testSearchListFilters: equalities on attributes (ANDed), with the
// other filters and the times, keep exactly the matching instances in the
// list's order, page by page at every limit.
func testSearchListFilters(t *testing.T, h Harness) {
	b := setup(t, h)
	customers := []string{"acme", "globex", "initech"}
	var rows []searched
	for i := range 24 {
		attrs := map[string]json.RawMessage{"customer": raw(fmt.Sprintf("%q", customers[i%3]))}
		text := map[string]string{"customer": customers[i%3]}
		if i%2 == 0 {
			attrs["tier"], text["tier"] = raw(fmt.Sprint(i%4)), fmt.Sprint(i%4) // a number
		} else {
			attrs["tier"], text["tier"] = raw(fmt.Sprintf(`"%d"`, i%4)), fmt.Sprint(i%4) // the same as text
		}
		if i%5 == 0 {
			attrs["vip"], text["vip"] = raw(`true`), "true"
		}
		if i%7 == 0 {
			attrs, text = nil, nil // none at all
		}
		def := "a"
		if i%4 == 3 {
			def = "b"
		}
		// Two instances per created_at, so filters meet ties too.
		at := clockStart.Add(time.Duration(i/2) * time.Second)
		l := b.createAt(t, at, store.CreateParams{ID: fmt.Sprintf("w-%02d", i), Definition: def, Status: workflow.StatusRunning, Search: attrs})
		rows = append(rows, searched{listed: l, attrs: text, updated: l.created})
	}
	// Some are written later: their update time moves on.
	for i := range rows {
		if i%3 == 1 {
			at := b.clock.Set(clockStart.Add(time.Hour + time.Duration(i)*time.Second))
			inst := b.transition(t, rows[i].id, workflow.StatusRunning, workflow.StatusPaused)
			rows[i].status, rows[i].updated = inst.Status, store.Timestamp(at)
		}
	}
	mid := clockStart.Add(5 * time.Second)
	for _, p := range []store.ListParams{
		{Search: map[string]string{"customer": "acme"}},
		{Search: map[string]string{"customer": "globex", "tier": "1"}},
		{Search: map[string]string{"tier": "2"}},
		{Search: map[string]string{"vip": "true"}},
		{Search: map[string]string{"vip": "false"}},
		{Search: map[string]string{"customer": "nobody"}},
		{Search: map[string]string{"customer": "acme", "tier": "0", "vip": "true"}},
		{Search: map[string]string{"customer": "acme"}, Status: workflow.StatusPaused},
		{Search: map[string]string{"customer": "initech"}, Definition: "b"},
		{Search: map[string]string{"customer": "acme"}, IDPrefix: "w-1"},
		{Search: map[string]string{"customer": "globex"}, CreatedAfter: mid},
		{Search: map[string]string{"customer": "globex"}, CreatedBefore: mid},
		{Search: map[string]string{"tier": "1"}, CreatedAfter: clockStart.Add(2 * time.Second), CreatedBefore: clockStart.Add(9 * time.Second)},
		{Search: map[string]string{"customer": "acme"}, UpdatedBefore: clockStart.Add(time.Hour)},
		{CreatedAfter: mid},
		{CreatedBefore: mid, Status: workflow.StatusRunning},
		{UpdatedBefore: clockStart.Add(time.Hour + 10*time.Second)},
		{CreatedAfter: mid, UpdatedBefore: clockStart.Add(time.Hour), Definition: "a"},
	} {
		var match []listed
		for _, r := range rows {
			if matches(r, p) {
				match = append(match, r.listed)
			}
		}
		want := newestFirst(match)
		for _, limit := range []int{1, 2, 5, 100} {
			p.Limit = limit
			got := b.listAll(t, p)
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("List(%+v) (-want +got):\n%s", p, diff)
			}
		}
	}
}

// matches is the model of List's filters.
func matches(r searched, p store.ListParams) bool {
	for name, v := range p.Search {
		if got, ok := r.attrs[name]; !ok || got != v {
			return false
		}
	}
	return (p.Status == "" || r.status == p.Status) &&
		(p.Definition == "" || r.definition == p.Definition) &&
		strings.HasPrefix(r.id, p.IDPrefix) &&
		(p.CreatedAfter.IsZero() || r.created.After(p.CreatedAfter)) &&
		(p.CreatedBefore.IsZero() || r.created.Before(p.CreatedBefore)) &&
		(p.UpdatedBefore.IsZero() || r.updated.Before(p.UpdatedBefore))
}

// testListTimes: the time filters are exact at the stored precision:
// an instance created at t is not created after t, nor before it, and is
// before t plus a nanosecond.
func testListTimes(t *testing.T, h Harness) {
	b := setup(t, h)
	at := clockStart.Add(time.Minute)
	b.createAt(t, at, store.CreateParams{ID: "x"})
	ts := store.Timestamp(at)
	for _, c := range []struct {
		p    store.ListParams
		want []string
	}{
		{store.ListParams{CreatedAfter: ts}, nil},
		{store.ListParams{CreatedAfter: ts.Add(-time.Nanosecond)}, []string{"x"}},
		{store.ListParams{CreatedBefore: ts}, nil},
		{store.ListParams{CreatedBefore: ts.Add(time.Nanosecond)}, []string{"x"}},
		{store.ListParams{UpdatedBefore: ts}, nil},
		{store.ListParams{UpdatedBefore: ts.Add(time.Nanosecond)}, []string{"x"}},
		{store.ListParams{CreatedAfter: ts.Add(-time.Nanosecond), CreatedBefore: ts.Add(time.Nanosecond)}, []string{"x"}},
	} {
		if diff := cmp.Diff(c.want, b.listAll(t, c.p), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("List(%+v) (-want +got):\n%s", c.p, diff)
		}
	}
}

// testSearchInvalid: a bad name, a value that is no string, number or
// boolean, too long a value or too many attributes write nothing
// (ErrInvalidArgument); a list by a bad name is refused the same way.
func testSearchInvalid(t *testing.T, h Harness) {
	b := setup(t, h)
	many := map[string]json.RawMessage{}
	for i := range 17 {
		many[fmt.Sprintf("a%d", i)] = raw(`1`)
	}
	for name, attrs := range map[string]map[string]json.RawMessage{
		"upper-case name":  {"Customer": raw(`"x"`)},
		"name with a dash": {"a-b": raw(`"x"`)},
		"digit first":      {"1a": raw(`"x"`)},
		"too long a name":  {strings.Repeat("a", 64): raw(`"x"`)},
		"object":           {"a": raw(`{"x":1}`)},
		"array":            {"a": raw(`[1]`)},
		"null":             {"a": raw(`null`)},
		"too long a value": {"a": raw(`"` + strings.Repeat("x", 513) + `"`)},
		"17 attributes":    many,
	} {
		_, err := b.s.Create(b.ctx, store.CreateParams{ID: "bad", Search: attrs})
		if !errors.Is(err, store.ErrInvalidArgument) || !errors.Is(err, workflow.ErrInvalidSearch) {
			t.Errorf("%s: Create = %v, want ErrInvalidArgument and ErrInvalidSearch", name, err)
		}
	}
	if _, err := b.s.Get(b.ctx, "bad"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get of a refused create = %v, want ErrNotFound", err)
	}
	for _, p := range []store.ListParams{
		{Search: map[string]string{"Bad": "x"}},
		{Search: map[string]string{"a": strings.Repeat("x", 513)}},
	} {
		if _, err := b.s.List(b.ctx, p); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("List(%+v) = %v, want ErrInvalidArgument", p, err)
		}
	}
}

// testSearchApply: a guarded write sets attributes (replacing those of
// its names, keeping the others); a write that misses its guard, or would
// leave too many, sets none; the group writes refuse them.
func testSearchApply(t *testing.T, h Harness) {
	b := setup(t, h)
	inst := b.create(t, store.CreateParams{ID: "s", Status: workflow.StatusRunning, Search: map[string]json.RawMessage{"customer": raw(`"acme"`), "stage": raw(`1`)}})
	write := func(version int64, attrs map[string]json.RawMessage) *store.Write {
		return &store.Write{ID: "s", ExpectedVersion: version, From: workflow.StatusRunning, Status: workflow.StatusRunning,
			State: inst.State.Clone(), Cause: "search set", Search: attrs}
	}
	if _, err := b.s.Apply(b.ctx, write(0, map[string]json.RawMessage{"stage": raw(`2`), "region": raw(`"eu"`)})); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	want := map[string]string{"customer": `"acme"`, "stage": `2`, "region": `"eu"`}
	got := b.get(t, "s")
	if diff := cmp.Diff(want, jsonStrings(got.Search)); diff != "" || got.Version != 1 {
		t.Errorf("after Apply: version %d (want 1), search (-want +got):\n%s", got.Version, diff)
	}
	if ids := b.listAll(t, store.ListParams{Search: map[string]string{"stage": "2", "region": "eu"}}); !cmp.Equal(ids, []string{"s"}) {
		t.Errorf("List by the attributes written = %v, want [s]", ids)
	}
	if ids := b.listAll(t, store.ListParams{Search: map[string]string{"stage": "1"}}); len(ids) != 0 {
		t.Errorf("List by the value replaced = %v, want none", ids)
	}
	// A stale version writes nothing.
	var ce *store.ConflictError
	if _, err := b.s.Apply(b.ctx, write(0, map[string]json.RawMessage{"stage": raw(`3`)})); !errors.As(err, &ce) || ce.Actual != 1 {
		t.Errorf("Apply at a stale version = %v, want a *ConflictError at version 1", err)
	}
	// Too many attributes write nothing either.
	many := map[string]json.RawMessage{}
	for i := range 14 {
		many[fmt.Sprintf("a%d", i)] = raw(`1`)
	}
	if _, err := b.s.Apply(b.ctx, write(1, many)); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("Apply to 17 attributes = %v, want ErrInvalidArgument", err)
	}
	got = b.get(t, "s")
	if diff := cmp.Diff(want, jsonStrings(got.Search)); diff != "" || got.Version != 1 {
		t.Errorf("after the refused writes: version %d (want 1), search (-want +got):\n%s", got.Version, diff)
	}
	if _, err := b.s.ApplyEach(b.ctx, []*store.Write{write(1, map[string]json.RawMessage{"x": raw(`1`)})}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("ApplyEach with search = %v, want ErrInvalidArgument", err)
	}
	if _, _, err := b.s.ApplyGroup(b.ctx, nil, []*store.Write{write(1, map[string]json.RawMessage{"x": raw(`1`)})}, nil); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("ApplyGroup with search = %v, want ErrInvalidArgument", err)
	}
	// A group's creates store theirs.
	created, _, err := b.s.ApplyGroup(b.ctx, []store.CreateParams{{ID: "g", Search: map[string]json.RawMessage{"customer": raw(`"acme"`)}}}, nil, nil)
	if err != nil {
		t.Fatalf("ApplyGroup create: %v", err)
	}
	if diff := cmp.Diff(map[string]string{"customer": `"acme"`}, jsonStrings(created[0].Search)); diff != "" {
		t.Errorf("ApplyGroup's created search (-want +got):\n%s", diff)
	}
	if ids := b.listAll(t, store.ListParams{Search: map[string]string{"customer": "acme"}}); !cmp.Equal(ids, []string{"s", "g"}) && !cmp.Equal(ids, []string{"g", "s"}) {
		t.Errorf("List by customer = %v, want g and s", ids)
	}
}

// testSearchDeleted: deleting an instance deletes its attributes: a new
// instance of the same id has none, and a list by them finds nothing.
func testSearchDeleted(t *testing.T, h Harness) {
	b := setup(t, h)
	inst := b.create(t, store.CreateParams{ID: "d", Status: workflow.StatusRunning, Search: map[string]json.RawMessage{"customer": raw(`"acme"`)}})
	inst = b.transition(t, inst.ID, workflow.StatusRunning, workflow.StatusCancelled)
	if err := b.s.DeleteInstance(b.ctx, "d", &inst.Version); err != nil {
		t.Fatalf("DeleteInstance: %v", err)
	}
	if ids := b.listAll(t, store.ListParams{Search: map[string]string{"customer": "acme"}}); len(ids) != 0 {
		t.Errorf("List by the deleted instance's attribute = %v, want none", ids)
	}
	if again := b.create(t, store.CreateParams{ID: "d"}); again.Search != nil || b.get(t, "d").Search != nil {
		t.Errorf("a new instance of the deleted id has search %v, want none", b.get(t, "d").Search)
	}
}
