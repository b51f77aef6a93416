package storetest

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// Re-runs: the link a re-run is created with (the instance it re-runs),
// read back by every read, and the lookup of an instance's re-runs.

var rerunTests = []conformanceTest{
	{"Reruns_link", testRerunsLink},
	{"Reruns_listByOriginal", testRerunsListByOriginal},
	{"Reruns_originalDeleted", testRerunsOriginalDeleted},
}

// testRerunsLink: the link is stored as given and read back by Get, List
// and a write's result; an instance without one has none; a malformed id
// writes nothing.
func testRerunsLink(t *testing.T, h Harness) {
	b := setup(t, h)
	b.create(t, store.CreateParams{ID: "orig"})
	made := b.create(t, store.CreateParams{ID: "again", RerunOf: "orig"})
	if made.RerunOf != "orig" {
		t.Fatalf("Create returned rerun_of %q, want orig", made.RerunOf)
	}
	if got := b.get(t, "again").RerunOf; got != "orig" {
		t.Fatalf("Get: rerun_of %q, want orig", got)
	}
	if got := b.get(t, "orig").RerunOf; got != "" {
		t.Fatalf("the original is a re-run of %q", got)
	}
	moved := b.transition(t, "again", workflow.StatusPending, workflow.StatusRunning)
	if moved.RerunOf != "orig" {
		t.Fatalf("TransitionStatus returned rerun_of %q", moved.RerunOf)
	}
	raw, err := json.Marshal(b.get(t, "again"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"rerun_of":"orig"`) {
		t.Fatalf("the re-run as JSON: %s", raw)
	}
	if raw, _ := json.Marshal(b.get(t, "orig")); strings.Contains(string(raw), "rerun_of") {
		t.Fatalf("the original as JSON: %s", raw)
	}
	_, err = b.s.Create(b.ctx, store.CreateParams{ID: "bad", RerunOf: "a b"})
	wantErrorIs(t, "Create with a malformed rerun_of", err, workflow.ErrInvalidID)
	if _, err := b.s.Get(b.ctx, "bad"); err == nil {
		t.Error("a create with a malformed rerun_of wrote the instance")
	}
}

// testRerunsListByOriginal: ?rerun_of keeps exactly that instance's
// re-runs, newest first, combines with the status filter and pages; a
// malformed id is refused.
func testRerunsListByOriginal(t *testing.T, h Harness) {
	b := setup(t, h)
	b.create(t, store.CreateParams{ID: "o1"})
	b.create(t, store.CreateParams{ID: "o2"})
	var want []string
	for i := range 5 {
		id := "r" + string(rune('a'+i))
		b.createAt(t, clockStart.Add(time.Duration(i)*time.Second), store.CreateParams{ID: id, RerunOf: "o1"})
		want = append([]string{id}, want...)
	}
	b.create(t, store.CreateParams{ID: "elsewhere", RerunOf: "o2"})
	b.transition(t, "rc", workflow.StatusPending, workflow.StatusCancelled)
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("paging does not end")
		}
		page, err := b.s.List(b.ctx, store.ListParams{RerunOf: "o1", Limit: 2, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, inst := range page.Instances {
			got = append(got, inst.ID)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("re-runs of o1 = %v, want %v (newest first)", got, want)
	}
	page, err := b.s.List(b.ctx, store.ListParams{RerunOf: "o1", Status: workflow.StatusCancelled})
	if err != nil || len(page.Instances) != 1 || page.Instances[0].ID != "rc" {
		t.Errorf("cancelled re-runs of o1 = %v, %v; want rc", page.Instances, err)
	}
	if page, err := b.s.List(b.ctx, store.ListParams{RerunOf: "elsewhere"}); err != nil || len(page.Instances) != 0 {
		t.Errorf("re-runs of an instance never re-run = %v, %v", page.Instances, err)
	}
	_, err = b.s.List(b.ctx, store.ListParams{RerunOf: "a b"})
	wantErrorIs(t, "List with a malformed rerun_of", err, workflow.ErrInvalidID)
}

// testRerunsOriginalDeleted: deleting the original leaves its re-runs as
// they were, still naming it (no reference to break), and still found by
// it.
func testRerunsOriginalDeleted(t *testing.T, h Harness) {
	b := setup(t, h)
	orig := b.finished(t, "first", workflow.StatusCompleted)
	b.create(t, store.CreateParams{ID: "second", RerunOf: "first"})
	if err := b.s.DeleteInstance(b.ctx, "first", &orig.Version); err != nil {
		t.Fatalf("DeleteInstance(first): %v", err)
	}
	b.wantDeleted(t, "the original", "first")
	if got := b.get(t, "second").RerunOf; got != "first" {
		t.Fatalf("after the original's delete, rerun_of = %q, want first", got)
	}
	page, err := b.s.List(b.ctx, store.ListParams{RerunOf: "first"})
	if err != nil || len(page.Instances) != 1 || page.Instances[0].ID != "second" {
		t.Errorf("re-runs of the deleted original = %v, %v; want second", page.Instances, err)
	}
}
