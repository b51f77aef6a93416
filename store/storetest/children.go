package storetest

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// Child workflows: the parent link an instance is created with, the lookup
// of a parent's children, and the sweep's read of finished children whose
// parent's step still waits for them.

var childTests = []conformanceTest{
	{"Children_parentLink", testChildrenParentLink},
	{"Children_listByParent", testChildrenListByParent},
}

// testChildrenParentLink: the link is stored as given and read back by
// every read (Get, List, the writes' results); an instance without one has
// none; a malformed link writes nothing.
func testChildrenParentLink(t *testing.T, h Harness) {
	b := setup(t, h)
	b.create(t, store.CreateParams{ID: "mom"})
	two := 2
	kid := b.create(t, store.CreateParams{ID: "kid", Parent: &workflow.ParentRef{WorkflowID: "mom", Step: "lines", Index: &two}})
	solo := b.create(t, store.CreateParams{ID: "solo", Parent: &workflow.ParentRef{WorkflowID: "mom", Step: "a.b"}})
	for _, inst := range []*workflow.Instance{kid, b.get(t, "kid")} {
		if p := inst.Parent; p == nil || p.WorkflowID != "mom" || p.Step != "lines" || p.Index == nil || *p.Index != 2 {
			t.Fatalf("kid's parent %+v", p)
		}
	}
	if p := b.get(t, "solo").Parent; p == nil || p.Step != "a.b" || p.Index != nil || solo.Parent.Index != nil {
		t.Fatalf("solo's parent %+v", p)
	}
	if p := b.get(t, "mom").Parent; p != nil {
		t.Fatalf("mom has a parent %+v", p)
	}
	raw, err := json.Marshal(b.get(t, "kid"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"parent":{"workflow_id":"mom","step":"lines","index":2}`) {
		t.Fatalf("kid as JSON: %s", raw)
	}
	moved := b.transition(t, "kid", workflow.StatusPending, workflow.StatusRunning)
	if moved.Parent == nil || moved.Parent.WorkflowID != "mom" {
		t.Fatalf("TransitionStatus returned parent %+v", moved.Parent)
	}
	neg := -1
	for _, p := range []*workflow.ParentRef{
		{WorkflowID: "", Step: "a"}, {WorkflowID: "a b", Step: "a"}, {WorkflowID: "mom", Step: ""}, {WorkflowID: "mom", Step: "a", Index: &neg},
	} {
		_, err := b.s.Create(b.ctx, store.CreateParams{ID: "bad", Parent: p})
		if err == nil {
			t.Errorf("Create with parent %+v: no error", p)
		}
	}
	if _, err := b.s.Get(b.ctx, "bad"); err == nil {
		t.Error("a create with a malformed parent wrote the instance")
	}
}

// testChildrenListByParent: ?parent keeps exactly that parent's children,
// combines with the status filter and pages; a malformed id is refused.
func testChildrenListByParent(t *testing.T, h Harness) {
	b := setup(t, h)
	b.create(t, store.CreateParams{ID: "p1"})
	b.create(t, store.CreateParams{ID: "p2"})
	var want []string
	for i := range 5 {
		id := "k" + string(rune('a'+i))
		b.createAt(t, clockStart.Add(time.Duration(i)*time.Second), store.CreateParams{ID: id, Parent: &workflow.ParentRef{WorkflowID: "p1", Step: "s"}})
		want = append(want, id)
	}
	b.create(t, store.CreateParams{ID: "other", Parent: &workflow.ParentRef{WorkflowID: "p2", Step: "s"}})
	b.transition(t, "kc", workflow.StatusPending, workflow.StatusCancelled)
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("paging does not end")
		}
		page, err := b.s.List(b.ctx, store.ListParams{Parent: "p1", Limit: 2, Cursor: cursor})
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
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Errorf("children of p1 = %v, want %v", got, want)
	}
	page, err := b.s.List(b.ctx, store.ListParams{Parent: "p1", Status: workflow.StatusCancelled})
	if err != nil || len(page.Instances) != 1 || page.Instances[0].ID != "kc" {
		t.Errorf("cancelled children of p1 = %v, %v; want kc", page.Instances, err)
	}
	if page, err := b.s.List(b.ctx, store.ListParams{Parent: "other"}); err != nil || len(page.Instances) != 0 {
		t.Errorf("children of a childless instance = %v, %v", page.Instances, err)
	}
	_, err = b.s.List(b.ctx, store.ListParams{Parent: "a b"})
	wantErrorIs(t, "List with a malformed parent", err, workflow.ErrInvalidID)
}
