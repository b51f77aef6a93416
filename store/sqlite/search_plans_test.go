package sqlite

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
)

// searchPlanRows is how many instances the plan test fills: 20,000 by
// default, or FLOWD_SEARCH_PLAN_ROWS (the plans are the same with
// 1,000,000, which takes SQLite a minute to fill, and many more under
// -race).
func searchPlanRows(t *testing.T) int {
	if v := os.Getenv("FLOWD_SEARCH_PLAN_ROWS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1000 {
			t.Fatalf("FLOWD_SEARCH_PLAN_ROWS=%q: want a number from 1000 on", v)
		}
		return n
	}
	return 20_000
}

// A list by search attributes reads the attribute's index in the list's
// order, from the cursor on, and stops at the page: no table is scanned
// and no temporary B-tree sorts the rows, with one attribute, with a
// creation time, with two attributes, before ANALYZE and after it.
func TestListBySearchUsesIndex(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a large table")
	}
	t.Parallel()
	s := openMigrated(t)
	n := searchPlanRows(t)
	start := store.Timestamp(t0).UnixMicro()
	for _, stmt := range []string{
		`WITH RECURSIVE i(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM i WHERE n + 1 < ?1)
		INSERT INTO workflow_instances (id, definition, status, state, input, version, created_at, updated_at)
		SELECT printf('w%07d', n), 'order', CASE WHEN n % 10 = 0 THEN 'COMPLETED' ELSE 'RUNNING' END, '{}', '{}', 0, ?2 + n * 1000, ?2 + n * 1000 FROM i`,
		`INSERT INTO workflow_search (instance_id, name, value, kind, created_at)
		SELECT id, 'customer', 'c' || ((created_at * 7919) % (?1 / 1000)), 'string', created_at FROM workflow_instances
		UNION ALL
		SELECT id, 'region', 'r' || ((created_at * 31) % 10), 'string', created_at FROM workflow_instances`,
	} {
		if _, err := s.writeDB.ExecContext(t.Context(), stmt, n, start); err != nil {
			t.Fatalf("fixture: %v\n%s", err, stmt)
		}
	}
	cursor := store.EncodeCursor(store.Cursor{CreatedAt: time.UnixMicro(start + int64(n/2)*1000), ID: "w0000000"})
	after := time.UnixMicro(start + int64(n/3)*1000)
	cases := []struct {
		name string
		p    store.ListParams
	}{
		{"one attribute", store.ListParams{Search: map[string]string{"customer": "c7"}}},
		{"one attribute, from a cursor", store.ListParams{Search: map[string]string{"customer": "c7"}, Cursor: cursor}},
		{"one attribute, created after", store.ListParams{Search: map[string]string{"customer": "c7"}, CreatedAfter: after}},
		{"two attributes", store.ListParams{Search: map[string]string{"customer": "c7", "region": "r3"}}},
		{"one attribute and a status", store.ListParams{Search: map[string]string{"customer": "c7"}, Status: "RUNNING"}},
	}
	for _, analysed := range []bool{false, true} {
		if analysed {
			if _, err := s.writeDB.ExecContext(t.Context(), "ANALYZE"); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range cases {
			p := c.p
			if err := p.Normalize(); err != nil {
				t.Fatal(err)
			}
			query, args, err := listSQL(p)
			if err != nil {
				t.Fatal(err)
			}
			plan := strings.Join(queryPlan(t, s, query, args...), "\n")
			if !strings.Contains(plan, "SEARCH s0 USING COVERING INDEX workflow_search_value_idx (name=? AND value=?") {
				t.Errorf("%s (analysed %v): does not search workflow_search_value_idx:\n%s", c.name, analysed, plan)
			}
			for _, bad := range []string{"SCAN ", "TEMP B-TREE"} {
				if strings.Contains(plan, bad) {
					t.Errorf("%s (analysed %v): %s:\n%s", c.name, analysed, bad, plan)
				}
			}
			if analysed {
				t.Logf("%s:\n%s", c.name, plan)
			}
		}
	}
}
