package storetest

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

var listTests = []conformanceTest{
	{"List_empty", testListEmpty},
	{"List_order", testListOrder},
	{"List_paging", testListPaging},
	{"List_stableWhileCreating", testListStableWhileCreating},
	{"List_filters", testListFilters},
	{"List_defaultLimit", testListDefaultLimit},
	{"List_invalidArguments", testListInvalidArguments},
	{"List_invalidCursor", testListInvalidCursor},
	{"List_foreignCursor", testListForeignCursor},
}

// listed is what the suite knows about a created instance, to compute the
// expected List order itself.
type listed struct {
	id         string
	created    time.Time // store.Timestamp of the clock at creation
	status     workflow.Status
	definition string
}

// newestFirst sorts by created_at, then id, both descending: List's order.
func newestFirst(rows []listed) []string {
	rows = slices.Clone(rows)
	slices.SortFunc(rows, func(a, b listed) int {
		if c := b.created.Compare(a.created); c != 0 {
			return c
		}
		return strings.Compare(b.id, a.id)
	})
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.id
	}
	return ids
}

// createAt creates an instance with the clock set to at.
func (b *bundle) createAt(t testing.TB, at time.Time, p store.CreateParams) listed {
	t.Helper()
	b.clock.Set(at)
	inst := b.create(t, p)
	return listed{id: inst.ID, created: store.Timestamp(at), status: inst.Status, definition: inst.Definition}
}

// listAll pages through List with p and returns every id, checking the page
// invariants on the way.
func (b *bundle) listAll(t testing.TB, p store.ListParams) []string {
	t.Helper()
	var ids []string
	limit := p.Limit
	if limit == 0 {
		limit = store.DefaultListLimit
	}
	for pages := 0; ; pages++ {
		if pages > 10000 {
			t.Fatalf("List(%+v): more than 10000 pages; the cursor does not advance", p)
		}
		page, err := b.s.List(b.ctx, p)
		if err != nil {
			t.Fatalf("List(%+v): %v", p, err)
		}
		if len(page.Instances) > limit {
			t.Errorf("List(%+v): %d instances on a page, limit is %d", p, len(page.Instances), limit)
		}
		if page.NextCursor != "" && len(page.Instances) < limit {
			t.Errorf("List(%+v): a short page (%d < %d) with a next cursor", p, len(page.Instances), limit)
		}
		if page.NextCursor == "" && len(page.Instances) == 0 && pages > 0 {
			t.Errorf("List(%+v): an empty last page: the previous page should have had no cursor (fetch limit+1)", p)
		}
		for _, inst := range page.Instances {
			ids = append(ids, inst.ID)
		}
		if page.NextCursor == "" {
			return ids
		}
		p.Cursor = page.NextCursor
	}
}

func testListEmpty(t *testing.T, h Harness) {
	b := setup(t, h)
	page, err := b.s.List(b.ctx, store.ListParams{})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(page.Instances) != 0 || page.NextCursor != "" {
		t.Errorf("List on an empty database = %d instances, cursor %q; want none and \"\"", len(page.Instances), page.NextCursor)
	}
}

func testListOrder(t *testing.T, h Harness) {
	b := setup(t, h)
	t0 := clockStart
	var rows []listed
	rows = append(rows,
		b.createAt(t, t0, store.CreateParams{ID: "i1"}),
		b.createAt(t, t0.Add(time.Second), store.CreateParams{ID: "i2"}),
		// Ties on created_at, created out of id order.
		b.createAt(t, t0.Add(2*time.Second), store.CreateParams{ID: "tie-b"}),
		b.createAt(t, t0.Add(2*time.Second), store.CreateParams{ID: "tie-c"}),
		b.createAt(t, t0.Add(2*time.Second), store.CreateParams{ID: "tie-a"}),
		// Clock readings 1 ns apart store the same microsecond: a tie too,
		// broken by id, never by the nanoseconds a store should not keep.
		b.createAt(t, t0.Add(3*time.Second+1), store.CreateParams{ID: "ns-z"}),
		b.createAt(t, t0.Add(3*time.Second+2), store.CreateParams{ID: "ns-a"}),
		b.createAt(t, t0.Add(3*time.Second), store.CreateParams{ID: "ns-m"}),
		// Server ids and an older instance created last.
		b.createAt(t, t0.Add(4*time.Second), store.CreateParams{}),
		b.createAt(t, t0.Add(-time.Hour), store.CreateParams{ID: "old"}),
	)
	want := newestFirst(rows)
	page, err := b.s.List(b.ctx, store.ListParams{Limit: 100})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	var got []string
	for _, inst := range page.Instances {
		got = append(got, inst.ID)
		assertInstance(t, "listed "+inst.ID, b.get(t, inst.ID), inst)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("List order (-want +got):\n%s", diff)
	}
	if page.NextCursor != "" {
		t.Errorf("NextCursor = %q on the only page, want \"\"", page.NextCursor)
	}
}

func testListPaging(t *testing.T, h Harness) {
	b := setup(t, h)
	t0 := clockStart
	var rows []listed
	// Groups of three equal created_at, so page boundaries fall inside ties.
	for g, n := range []int{1, 3, 3} {
		for i := range n {
			rows = append(rows, b.createAt(t, t0.Add(time.Duration(g)*time.Minute), store.CreateParams{ID: fmt.Sprintf("g%d-%c", g, 'c'-i)}))
		}
	}
	want := newestFirst(rows)
	for limit := 1; limit <= len(rows)+1; limit++ {
		got := b.listAll(t, store.ListParams{Limit: limit})
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("paging with limit %d (-want +got):\n%s", limit, diff)
		}
	}
	// Page by page with limit 2: exactly ceil(7/2) = 4 pages.
	var pages [][]string
	cursor := ""
	for range 10 {
		page, err := b.s.List(b.ctx, store.ListParams{Limit: 2, Cursor: cursor})
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		var ids []string
		for _, inst := range page.Instances {
			ids = append(ids, inst.ID)
		}
		pages = append(pages, ids)
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	wantPages := [][]string{want[0:2], want[2:4], want[4:6], want[6:7]}
	if diff := cmp.Diff(wantPages, pages); diff != "" {
		t.Errorf("pages of 2 (-want +got):\n%s", diff)
	}
}

func testListStableWhileCreating(t *testing.T, h Harness) {
	b := setup(t, h)
	t0 := clockStart
	var rows []listed
	for i := range 6 {
		rows = append(rows, b.createAt(t, t0.Add(time.Duration(i)*time.Second), store.CreateParams{ID: fmt.Sprintf("orig-%d", i)}))
	}
	want := newestFirst(rows)
	var got []string
	cursor := ""
	later := t0.Add(time.Hour)
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("too many pages")
		}
		page, err := b.s.List(b.ctx, store.ListParams{Limit: 2, Cursor: cursor})
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		for _, inst := range page.Instances {
			got = append(got, inst.ID)
		}
		// Instances created between pages are newer than every listed one.
		for j := range 2 {
			later = later.Add(time.Second)
			b.createAt(t, later, store.CreateParams{ID: fmt.Sprintf("new-%d-%d", pages, j)})
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("paging while creating (-want +got):\n%s", diff)
	}
}

func testListFilters(t *testing.T, h Harness) {
	b := setup(t, h)
	t0 := clockStart
	var rows []listed
	for i, c := range []struct {
		def    string
		status workflow.Status
	}{
		{"a", workflow.StatusPending}, {"a", workflow.StatusRunning}, {"b", workflow.StatusRunning},
		{"", workflow.StatusRunning}, {"a", workflow.StatusRunning}, {"b", workflow.StatusPaused},
		{"", workflow.StatusPending}, {"ab", workflow.StatusRunning}, {"a", workflow.StatusFailed},
	} {
		// Two instances per created_at, so filters meet ties too.
		rows = append(rows, b.createAt(t, t0.Add(time.Duration(i/2)*time.Second), store.CreateParams{
			ID: fmt.Sprintf("f%d", i), Definition: c.def, Status: c.status,
		}))
	}
	for _, p := range []store.ListParams{
		{Status: workflow.StatusRunning},
		{Definition: "a"},
		{Definition: "a", Status: workflow.StatusRunning},
		{Definition: "b", Status: workflow.StatusPaused},
		{Definition: "zzz"},
		{Status: workflow.StatusTimedOut},
		{Definition: "b", Status: workflow.StatusPending},
	} {
		var match []listed
		for _, r := range rows {
			if (p.Status == "" || r.status == p.Status) && (p.Definition == "" || r.definition == p.Definition) {
				match = append(match, r)
			}
		}
		want := newestFirst(match)
		for _, limit := range []int{1, 2, 100} {
			p.Limit = limit
			got := b.listAll(t, p)
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("List(status %q, definition %q, limit %d) (-want +got):\n%s", p.Status, p.Definition, limit, diff)
			}
		}
	}
}

func testListDefaultLimit(t *testing.T, h Harness) {
	b := setup(t, h)
	for i := range store.DefaultListLimit + 1 {
		b.createAt(t, clockStart.Add(time.Duration(i)*time.Millisecond), store.CreateParams{})
	}
	page, err := b.s.List(b.ctx, store.ListParams{})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(page.Instances) != store.DefaultListLimit || page.NextCursor == "" {
		t.Fatalf("List with limit 0 = %d instances, cursor %q; want %d and a cursor", len(page.Instances), page.NextCursor, store.DefaultListLimit)
	}
	page, err = b.s.List(b.ctx, store.ListParams{Cursor: page.NextCursor})
	if err != nil {
		t.Fatalf("List page 2: %v", err)
	}
	if len(page.Instances) != 1 || page.NextCursor != "" {
		t.Errorf("List page 2 = %d instances, cursor %q; want 1 and \"\"", len(page.Instances), page.NextCursor)
	}
	page, err = b.s.List(b.ctx, store.ListParams{Limit: store.MaxListLimit})
	if err != nil {
		t.Fatalf("List with limit %d: %v", store.MaxListLimit, err)
	}
	if len(page.Instances) != store.DefaultListLimit+1 {
		t.Errorf("List with limit %d = %d instances, want %d", store.MaxListLimit, len(page.Instances), store.DefaultListLimit+1)
	}
}

func testListInvalidArguments(t *testing.T, h Harness) {
	b := setup(t, h)
	b.create(t, store.CreateParams{})
	for _, p := range []store.ListParams{
		{Limit: store.MaxListLimit + 1}, {Limit: -1}, {Limit: -1000}, {Status: "NOPE"}, {Status: "running"},
	} {
		page, err := b.s.List(b.ctx, p)
		wantErrorIs(t, fmt.Sprintf("List(%+v)", p), err, store.ErrInvalidArgument)
		if len(page.Instances) != 0 {
			t.Errorf("List(%+v) returned %d instances with an error", p, len(page.Instances))
		}
	}
}

func testListInvalidCursor(t *testing.T, h Harness) {
	b := setup(t, h)
	b.create(t, store.CreateParams{})
	enc := func(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
	ts := binary.BigEndian.AppendUint64(nil, uint64(clockStart.UnixMicro()))
	for _, c := range []string{
		"garbage!", "%%%", "a", "AAAA",
		enc(ts),                     // no id
		enc(append(ts, "a b"...)),   // an id that cannot exist
		enc(append(ts, "x\x00"...)), // NUL in the id
		base64.StdEncoding.EncodeToString(append(ts, "x"...)) + "=", // padded, not URL-safe
		"' OR '1'='1",
	} {
		page, err := b.s.List(b.ctx, store.ListParams{Cursor: c})
		wantErrorIs(t, fmt.Sprintf("List(cursor %q)", c), err, store.ErrInvalidCursor)
		wantErrorIs(t, fmt.Sprintf("List(cursor %q)", c), err, store.ErrInvalidArgument)
		if len(page.Instances) != 0 {
			t.Errorf("List(cursor %q) returned %d instances with an error", c, len(page.Instances))
		}
	}
}

// testListForeignCursor: a well-formed cursor is a position, whether or not a
// row with that id exists.
func testListForeignCursor(t *testing.T, h Harness) {
	b := setup(t, h)
	var rows []listed
	for i := range 3 {
		rows = append(rows, b.createAt(t, clockStart.Add(time.Duration(i)*time.Second), store.CreateParams{ID: fmt.Sprintf("r%d", i)}))
	}
	want := newestFirst(rows)
	future := store.EncodeCursor(store.Cursor{CreatedAt: clockStart.Add(time.Hour), ID: "zzz"})
	if got := b.listAll(t, store.ListParams{Cursor: future}); !slices.Equal(got, want) {
		t.Errorf("List after a cursor in the future = %v, want %v", got, want)
	}
	past := store.EncodeCursor(store.Cursor{CreatedAt: clockStart.Add(-time.Hour), ID: "a"})
	if got := b.listAll(t, store.ListParams{Cursor: past}); len(got) != 0 {
		t.Errorf("List after a cursor in the past = %v, want nothing", got)
	}
	// Same created_at as r1: "r1" itself and bigger ids at that time are excluded.
	mid := store.EncodeCursor(store.Cursor{CreatedAt: rows[1].created, ID: "r1"})
	if got := b.listAll(t, store.ListParams{Cursor: mid}); !slices.Equal(got, []string{"r0"}) {
		t.Errorf("List after (r1's created_at, r1) = %v, want [r0]", got)
	}
	between := store.EncodeCursor(store.Cursor{CreatedAt: rows[1].created, ID: "r1a"})
	if got := b.listAll(t, store.ListParams{Cursor: between}); !slices.Equal(got, []string{"r1", "r0"}) {
		t.Errorf("List after (r1's created_at, r1a) = %v, want [r1 r0]", got)
	}
}
