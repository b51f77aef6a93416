package storetest

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

var bulkTests = []conformanceTest{
	{"Bulk_putGetList", testBulkPutGetList},
	{"Bulk_compareAndSet", testBulkCompareAndSet},
	{"Bulk_invalid", testBulkInvalid},
	{"Bulk_concurrentSets", testBulkConcurrentSets},
	{"Bulk_pruned", testBulkPruned},
}

func newBulk(id string) *store.BulkOperation {
	after := store.Timestamp(clockStart.Add(-time.Hour))
	return &store.BulkOperation{
		ID: id, Action: "cancel", Status: store.BulkRunning, Actor: "ops",
		Filter: store.BulkFilter{Status: workflow.StatusRunning, Definition: "d", Search: map[string]string{"customer": "42"}, CreatedAfter: &after},
		Limit:  10,
	}
}

// testBulkPutGetList: an insert is version 1 with the store's times; every
// field comes back as stored; the list is newest first, by status, and by
// id ([] for an unknown one, ErrNotFound from GetBulk); a taken id is
// ErrExists.
func testBulkPutGetList(t *testing.T, h Harness) {
	b := setup(t, h)
	op := newBulk("b1")
	op.Errors = []store.BulkError{{WorkflowID: "w1", Error: "boom"}}
	op.Pending = []store.BulkItem{{ID: "w2", Version: 3}}
	op.PendingCursor, op.Cursor, op.Exhausted = "pc", "c", true
	op.Matched, op.Done, op.Skipped, op.Failed = 4, 2, 1, 1
	op.LeaseOwner, op.LeaseUntil = "node-a", clockStart.Add(time.Minute)
	out, err := b.s.PutBulk(b.ctx, op, 0)
	if err != nil {
		t.Fatalf("PutBulk insert: %v", err)
	}
	want := *op
	want.Version = 1
	want.CreatedAt, want.UpdatedAt = store.Timestamp(clockStart), store.Timestamp(clockStart)
	want.LeaseUntil = store.Timestamp(op.LeaseUntil)
	if diff := cmp.Diff(&want, out); diff != "" {
		t.Errorf("PutBulk returned (-want +got):\n%s", diff)
	}
	got, err := store.GetBulk(b.ctx, b.s, "b1")
	if err != nil {
		t.Fatalf("GetBulk: %v", err)
	}
	if diff := cmp.Diff(&want, got); diff != "" {
		t.Errorf("GetBulk (-want +got):\n%s", diff)
	}
	if _, err := b.s.PutBulk(b.ctx, newBulk("b1"), 0); !errors.Is(err, store.ErrExists) {
		t.Errorf("PutBulk of a taken id: err = %v, want ErrExists", err)
	}

	b.clock.Advance(time.Second)
	done := newBulk("b2")
	done.Status = store.BulkDone
	if _, err := b.s.PutBulk(b.ctx, done, 0); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Second)
	if _, err := b.s.PutBulk(b.ctx, newBulk("b3"), 0); err != nil {
		t.Fatal(err)
	}
	ids := func(p store.ListBulkParams) []string {
		t.Helper()
		list, err := b.s.ListBulk(b.ctx, p)
		if err != nil {
			t.Fatalf("ListBulk(%+v): %v", p, err)
		}
		out := []string{}
		for _, op := range list {
			out = append(out, op.ID)
		}
		return out
	}
	for _, tc := range []struct {
		p    store.ListBulkParams
		want []string
	}{
		{store.ListBulkParams{}, []string{"b3", "b2", "b1"}},
		{store.ListBulkParams{Limit: 2}, []string{"b3", "b2"}},
		{store.ListBulkParams{Status: store.BulkRunning}, []string{"b3", "b1"}},
		{store.ListBulkParams{Status: store.BulkDone}, []string{"b2"}},
		{store.ListBulkParams{Status: store.BulkCancelled}, []string{}},
		{store.ListBulkParams{ID: "b2"}, []string{"b2"}},
		{store.ListBulkParams{ID: "b2", Status: store.BulkRunning}, []string{}},
		{store.ListBulkParams{ID: "nope"}, []string{}},
	} {
		if got := ids(tc.p); !cmp.Equal(got, tc.want) {
			t.Errorf("ListBulk(%+v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if _, err := store.GetBulk(b.ctx, b.s, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetBulk(unknown): err = %v, want ErrNotFound", err)
	}
}

// testBulkCompareAndSet: a replace at the stored version writes and moves
// the version by one (created_at kept, updated_at the clock's); one at
// another version writes nothing and says which version is stored; one of
// an unknown id is ErrNotFound.
func testBulkCompareAndSet(t *testing.T, h Harness) {
	b := setup(t, h)
	op, err := b.s.PutBulk(b.ctx, newBulk("b1"), 0)
	if err != nil {
		t.Fatal(err)
	}
	now := b.clock.Advance(time.Second)
	next := *op
	next.Cursor, next.Done, next.Matched = "c1", 5, 5
	out, err := b.s.PutBulk(b.ctx, &next, op.Version)
	if err != nil {
		t.Fatalf("PutBulk at the stored version: %v", err)
	}
	if out.Version != 2 || out.Cursor != "c1" || out.Done != 5 || !out.CreatedAt.Equal(op.CreatedAt) || !out.UpdatedAt.Equal(store.Timestamp(now)) {
		t.Errorf("after the set: %+v", out)
	}
	// A writer that read version 1 loses.
	lost := *op
	lost.Status = store.BulkCancelled
	_, err = b.s.PutBulk(b.ctx, &lost, op.Version)
	var ce *store.ConflictError
	if !errors.As(err, &ce) || ce.Expected != 1 || ce.Actual != 2 {
		t.Fatalf("PutBulk at a stale version: err = %v, want a *ConflictError expected 1, actual 2", err)
	}
	if got, _ := store.GetBulk(b.ctx, b.s, "b1"); got.Version != 2 || got.Status != store.BulkRunning || got.Cursor != "c1" {
		t.Errorf("the lost set wrote: %+v", got)
	}
	ghost := newBulk("ghost")
	if _, err := b.s.PutBulk(b.ctx, ghost, 1); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("PutBulk of an unknown id: err = %v, want ErrNotFound", err)
	}
}

// testBulkInvalid: what must never be stored is refused before any write.
func testBulkInvalid(t *testing.T, h Harness) {
	b := setup(t, h)
	for name, mutate := range map[string]func(*store.BulkOperation){
		"no id":          func(op *store.BulkOperation) { op.ID = "" },
		"unknown action": func(op *store.BulkOperation) { op.Action = "explode" },
		"unknown status": func(op *store.BulkOperation) { op.Status = "SLEEPING" },
		"negative limit": func(op *store.BulkOperation) { op.Limit = -1 },
	} {
		op := newBulk("b1")
		mutate(op)
		if _, err := b.s.PutBulk(b.ctx, op, 0); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("%s: err = %v, want ErrInvalidArgument", name, err)
		}
	}
	if list, err := b.s.ListBulk(b.ctx, store.ListBulkParams{}); err != nil || len(list) != 0 {
		t.Errorf("after refused puts: %v, %v", list, err)
	}
	for _, p := range []store.ListBulkParams{{Limit: -1}, {Limit: store.MaxBulkListLimit + 1}, {Status: "SLEEPING"}} {
		if _, err := b.s.ListBulk(b.ctx, p); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("ListBulk(%+v): err = %v, want ErrInvalidArgument", p, err)
		}
	}
}

// testBulkConcurrentSets: of writers that all read one version, exactly
// one sets it; the others get a conflict.
func testBulkConcurrentSets(t *testing.T, h Harness) {
	b := setup(t, h)
	op, err := b.s.PutBulk(b.ctx, newBulk("b1"), 0)
	if err != nil {
		t.Fatal(err)
	}
	const writers = 8
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		won, lost int
	)
	for i := range writers {
		wg.Go(func() {
			next := *op
			next.LeaseOwner = "node-" + string(rune('a'+i))
			_, err := b.s.PutBulk(b.ctx, &next, op.Version)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
			case errors.Is(err, store.ErrConflict):
				lost++
			default:
				t.Errorf("writer %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if won != 1 || lost != writers-1 {
		t.Errorf("won %d, lost %d; want 1 and %d", won, lost, writers-1)
	}
	if got, _ := store.GetBulk(b.ctx, b.s, "b1"); got.Version != 2 {
		t.Errorf("version %d after one winning set, want 2", got.Version)
	}
}

// testBulkPruned: Prune(PruneBulk) deletes the operations that ended
// before the cutoff, oldest first, at most the limit; a RUNNING one stays
// however old. A limit below 1 is refused.
func testBulkPruned(t *testing.T, h Harness) {
	b := setup(t, h)
	put := func(id, status string) {
		t.Helper()
		op := newBulk(id)
		op.Status = status
		if _, err := b.s.PutBulk(b.ctx, op, 0); err != nil {
			t.Fatalf("PutBulk %s: %v", id, err)
		}
	}
	put("running", store.BulkRunning)
	put("done", store.BulkDone)
	b.clock.Advance(time.Second)
	put("cancelled", store.BulkCancelled)
	b.clock.Advance(time.Hour)
	put("recent", store.BulkDone)
	left := func() []string {
		t.Helper()
		list, err := b.s.ListBulk(b.ctx, store.ListBulkParams{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, op := range list {
			ids = append(ids, op.ID)
		}
		return ids
	}

	if _, err := b.prune(store.PruneBulk, clockStart.Add(time.Minute), 0); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("limit 0: err = %v, want ErrInvalidArgument", err)
	}
	if n, err := b.prune(store.PruneBulk, clockStart.Add(time.Minute), 1); err != nil || n != 1 {
		t.Fatalf("prune, limit 1: %d, %v; want 1", n, err)
	}
	if got := left(); !slices.Equal(got, []string{"recent", "cancelled", "running"}) {
		t.Errorf("after pruning the oldest: %v, want [recent cancelled running]", got)
	}
	if n, err := b.prune(store.PruneBulk, clockStart.Add(time.Minute), 10); err != nil || n != 1 {
		t.Fatalf("prune: %d, %v; want 1", n, err)
	}
	if got := left(); !slices.Equal(got, []string{"recent", "running"}) {
		t.Errorf("after the cutoff: %v, want [recent running]", got)
	}
}
