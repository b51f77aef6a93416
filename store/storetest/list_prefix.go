package storetest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

var idPrefixTests = []conformanceTest{
	{"List_idPrefix", testListIDPrefix},
	{"List_idPrefixLiteral", testListIDPrefixLiteral},
	{"List_idPrefixInvalid", testListIDPrefixInvalid},
}

// testListIDPrefix: the prefix filter keeps exactly the ids that start with
// it, combines with the other filters, and pages like an unfiltered list.
func testListIDPrefix(t *testing.T, h Harness) {
	b := setup(t, h)
	var rows []listed
	for i, c := range []struct {
		id     string
		def    string
		status workflow.Status
	}{
		{"order-1", "a", workflow.StatusRunning}, {"order-2", "a", workflow.StatusPending},
		{"order-10", "b", workflow.StatusRunning}, {"order", "a", workflow.StatusRunning},
		{"Order-3", "a", workflow.StatusRunning}, {"orders", "a", workflow.StatusRunning},
		{"ordeR-4", "a", workflow.StatusRunning}, {"x-order-5", "a", workflow.StatusRunning},
		{"order-11", "a", workflow.StatusRunning}, {"order-1.a", "a", workflow.StatusRunning},
		{"ord", "a", workflow.StatusRunning}, {"order-1:z", "a", workflow.StatusRunning},
	} {
		// Three instances per created_at, so the prefix meets ties too.
		rows = append(rows, b.createAt(t, clockStart.Add(time.Duration(i/3)*time.Second), store.CreateParams{
			ID: c.id, Definition: c.def, Status: c.status,
		}))
	}
	for _, p := range []store.ListParams{
		{IDPrefix: "order"},
		{IDPrefix: "order-1"},
		{IDPrefix: "order-"},
		{IDPrefix: "Order"},
		{IDPrefix: "order-1:z"},
		{IDPrefix: "order-1:zz"},
		{IDPrefix: "z"},
		{IDPrefix: "order", Status: workflow.StatusRunning},
		{IDPrefix: "order", Definition: "b"},
		{IDPrefix: "order-1", Definition: "a", Status: workflow.StatusRunning},
	} {
		var match []listed
		for _, r := range rows {
			if strings.HasPrefix(r.id, p.IDPrefix) && (p.Status == "" || r.status == p.Status) &&
				(p.Definition == "" || r.definition == p.Definition) {
				match = append(match, r)
			}
		}
		want := newestFirst(match)
		for _, limit := range []int{1, 2, 100} {
			p.Limit = limit
			got := b.listAll(t, p)
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("List(%+v) (-want +got):\n%s", p, diff)
			}
		}
	}
}

// testListIDPrefixLiteral: every character of a prefix is literal. "_" and
// "." match only themselves (no LIKE or regexp wildcard), and case counts.
func testListIDPrefixLiteral(t *testing.T, h Harness) {
	b := setup(t, h)
	for _, id := range []string{"a_b-1", "axb-2", "a_b", "A_B-3", "a.b-4", "a-b-5", "a_bc"} {
		b.create(t, store.CreateParams{ID: id})
	}
	for prefix, want := range map[string][]string{
		"a_b":  {"a_bc", "a_b", "a_b-1"},
		"a_b-": {"a_b-1"},
		"a.":   {"a.b-4"},
		"A_":   {"A_B-3"},
		"a_":   {"a_bc", "a_b", "a_b-1"},
		"ax":   {"axb-2"},
		"a":    {"a_bc", "a-b-5", "a.b-4", "a_b", "axb-2", "a_b-1"},
	} {
		got := b.listAll(t, store.ListParams{IDPrefix: prefix})
		// Created in one clock instant: newest first is id descending.
		if diff := cmp.Diff(sortedDesc(want), got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("List(id prefix %q) (-want +got):\n%s", prefix, diff)
		}
	}
}

func sortedDesc(ids []string) []string {
	rows := make([]listed, len(ids))
	for i, id := range ids {
		rows[i] = listed{id: id}
	}
	return newestFirst(rows)
}

// testListIDPrefixInvalid: a prefix that no id can start with is refused
// with the id rules, before any query: wildcards, quotes, too long.
func testListIDPrefixInvalid(t *testing.T, h Harness) {
	b := setup(t, h)
	b.create(t, store.CreateParams{ID: "a-1"})
	for _, prefix := range []string{"%", "a%", `a\`, "a b", "' OR '1'='1", "a\x00", "é", strings.Repeat("a", workflow.MaxIDLength+1)} {
		page, err := b.s.List(b.ctx, store.ListParams{IDPrefix: prefix})
		wantErrorIs(t, fmt.Sprintf("List(id prefix %q)", prefix), err, workflow.ErrInvalidID)
		if len(page.Instances) != 0 {
			t.Errorf("List(id prefix %q) returned %d instances with an error", prefix, len(page.Instances))
		}
	}
	// The longest valid prefix is a whole id.
	long := strings.Repeat("a", workflow.MaxIDLength)
	b.create(t, store.CreateParams{ID: long})
	if got := b.listAll(t, store.ListParams{IDPrefix: long}); !cmp.Equal(got, []string{long}) {
		t.Errorf("List(id prefix of %d characters) = %v, want the id itself", workflow.MaxIDLength, got)
	}
}
