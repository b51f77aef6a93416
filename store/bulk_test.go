package store_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// Matches is List's filter checked in Go on an instance as read: every
// field that is set must hold, the time bounds exclusive.
func TestListParamsMatches(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	inst := &workflow.Instance{ID: "order-17", Definition: "ship", Status: workflow.StatusRunning,
		CreatedAt: t0, UpdatedAt: t0.Add(time.Hour), Parent: &workflow.ParentRef{WorkflowID: "root", Step: "s"},
		RerunOf: "order-1", Search: map[string]json.RawMessage{"customer": json.RawMessage(`42.0`), "vip": json.RawMessage(`true`), "region": json.RawMessage(`"eu"`)}}
	for _, tc := range []struct {
		name string
		p    store.ListParams
		want bool
	}{
		{"nothing set", store.ListParams{}, true},
		{"status", store.ListParams{Status: workflow.StatusRunning}, true},
		{"other status", store.ListParams{Status: workflow.StatusPaused}, false},
		{"definition", store.ListParams{Definition: "ship"}, true},
		{"other definition", store.ListParams{Definition: "bill"}, false},
		{"parent", store.ListParams{Parent: "root"}, true},
		{"other parent", store.ListParams{Parent: "other"}, false},
		{"id prefix", store.ListParams{IDPrefix: "order-"}, true},
		{"other id prefix", store.ListParams{IDPrefix: "order-2"}, false},
		{"search", store.ListParams{Search: map[string]string{"customer": "42", "vip": "true"}}, true},
		{"search other value", store.ListParams{Search: map[string]string{"customer": "43"}}, false},
		{"search, a string", store.ListParams{Search: map[string]string{"region": "eu"}}, true},
		{"search, a string quoted", store.ListParams{Search: map[string]string{"region": `"eu"`}}, false},
		{"search unknown name", store.ListParams{Search: map[string]string{"tier": "gold"}}, false},
		{"rerun of", store.ListParams{RerunOf: "order-1"}, true},
		{"rerun of another", store.ListParams{RerunOf: "order-2"}, false},
		{"created after", store.ListParams{CreatedAfter: t0.Add(-time.Second)}, true},
		{"created after, at the bound", store.ListParams{CreatedAfter: t0}, false},
		{"created before", store.ListParams{CreatedBefore: t0.Add(time.Second)}, true},
		{"created before, at the bound", store.ListParams{CreatedBefore: t0}, false},
		{"updated before", store.ListParams{UpdatedBefore: t0.Add(2 * time.Hour)}, true},
		{"updated before, too early", store.ListParams{UpdatedBefore: t0.Add(time.Hour)}, false},
		{"all, one off", store.ListParams{Status: workflow.StatusRunning, Definition: "ship", IDPrefix: "x"}, false},
	} {
		if got := tc.p.Matches(inst); got != tc.want {
			t.Errorf("%s: Matches = %v, want %v", tc.name, got, tc.want)
		}
	}
	if (&store.ListParams{Parent: "root"}).Matches(&workflow.Instance{ID: "top"}) {
		t.Error("an instance without a parent matches a parent filter")
	}
}

// A bulk filter's bound: instances created after the operation are never
// in it, whatever the filter says; an earlier bound of the filter wins.
func TestBulkFilterListParams(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	f := store.BulkFilter{Definition: "d"}
	if p := f.ListParams(at); !p.CreatedBefore.Equal(at) || p.Definition != "d" {
		t.Errorf("no bound given: %+v", p)
	}
	later, earlier := at.Add(time.Hour), at.Add(-time.Hour)
	f.CreatedBefore = &later
	if p := f.ListParams(at); !p.CreatedBefore.Equal(at) {
		t.Errorf("a later bound: CreatedBefore %v, want the operation's %v", p.CreatedBefore, at)
	}
	f.CreatedBefore = &earlier
	if p := f.ListParams(at); !p.CreatedBefore.Equal(earlier) {
		t.Errorf("an earlier bound: CreatedBefore %v, want %v", p.CreatedBefore, earlier)
	}
}

func TestBulkFilterProblems(t *testing.T) {
	if p := (&store.BulkFilter{}).Problems(); len(p) != 1 || !strings.Contains(p[0], "the filter is empty") {
		t.Errorf("empty filter: %q", p)
	}
	a, b := time.Now(), time.Now().Add(-time.Hour)
	p := (&store.BulkFilter{Status: "NOPE", CreatedAfter: &a, CreatedBefore: &b}).Problems()
	if len(p) != 2 || !strings.Contains(p[0], `unknown status "NOPE"`) || !strings.Contains(p[1], "created_after must be before") {
		t.Errorf("problems: %q", p)
	}
}
