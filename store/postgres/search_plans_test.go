package postgres

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
)

// searchFixture fills a migrated store with n instances, one a
// millisecond from t0 on, each with two search attributes: customer (n/1000
// values, so 1000 instances each) and region (10 values); a tenth of
// them COMPLETED. Written with SQL directly, then analysed.
func searchFixture(t *testing.T, s *Store, n int, t0 time.Time) {
	t.Helper()
	ctx := t.Context()
	for _, sql := range []string{
		`INSERT INTO workflow_instances (id, definition, status, state, input, created_at, updated_at)
		SELECT format('w%s', lpad(i::text, 7, '0')), 'order', CASE WHEN i % 10 = 0 THEN 'COMPLETED' ELSE 'RUNNING' END,
			'{}', '{}', $1::timestamptz + i * interval '1 millisecond', $1::timestamptz + i * interval '1 millisecond'
		FROM generate_series(0, $2::integer - 1) AS i`,
		`INSERT INTO workflow_search (instance_id, name, value, kind, created_at)
		SELECT id, 'customer', 'c' || (hashtext(id) & 2147483647) % ($1::integer / 1000), 'string', created_at FROM workflow_instances
		UNION ALL
		SELECT id, 'region', 'r' || (hashtext(id || 'r') & 2147483647) % 10, 'string', created_at FROM workflow_instances`,
		`ANALYZE workflow_instances, workflow_search`,
	} {
		var args []any
		switch {
		case strings.Contains(sql, "$2"):
			args = append(args, t0, n)
		case strings.Contains(sql, "$1"):
			args = append(args, n)
		}
		if _, err := s.pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("fixture: %v\n%s", err, sql)
		}
	}
}

// searchFixtureSize is 1,000,000, or FLOWD_SEARCH_PLAN_ROWS.
func searchFixtureSize(t *testing.T) int {
	if v := os.Getenv("FLOWD_SEARCH_PLAN_ROWS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1000 {
			t.Fatalf("FLOWD_SEARCH_PLAN_ROWS=%q: want a number from 1000 on", v)
		}
		return n
	}
	return 1_000_000
}

// A list by search attributes over a million instances reads the
// attribute's index in the list's order and stops at the page: no table
// is scanned and nothing sorted, whether it filters by one attribute or by
// one with a creation time or a status, on its first page and on a page
// from a cursor, in the custom and the generic plan. With two attributes
// the first one's rows drive and the second is looked up by each one's
// primary key: at worst the first one's matches are sorted, never another
// value's rows read.
func TestListBySearchUsesIndex(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a million instances")
	}
	t.Parallel()
	s, _ := setup(t, Options{})
	n := searchFixtureSize(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	searchFixture(t, s, n, t0)
	cursor := store.EncodeCursor(store.Cursor{CreatedAt: t0.Add(time.Duration(n/2) * time.Millisecond), ID: "w0500000"})
	for _, c := range []struct {
		name string
		p    store.ListParams
		// probed: a second attribute is looked up by each row's primary
		// key: the rows of the first one may then be sorted (at most
		// those of its value, never a whole table or another value's).
		probed bool
	}{
		{"one attribute", store.ListParams{Search: map[string]string{"customer": "c7"}}, false},
		{"one attribute, from a cursor", store.ListParams{Search: map[string]string{"customer": "c7"}, Cursor: cursor}, false},
		{"one attribute, created after", store.ListParams{Search: map[string]string{"customer": "c7"}, CreatedAfter: t0.Add(time.Duration(n/3) * time.Millisecond)}, false},
		{"one attribute, created between", store.ListParams{Search: map[string]string{"customer": "c7"},
			CreatedAfter: t0.Add(time.Duration(n/3) * time.Millisecond), CreatedBefore: t0.Add(time.Duration(n/2) * time.Millisecond)}, false},
		{"two attributes", store.ListParams{Search: map[string]string{"customer": "c7", "region": "r3"}}, true},
		{"two attributes, created after", store.ListParams{Search: map[string]string{"customer": "c7", "region": "r3"},
			CreatedAfter: t0.Add(time.Duration(n/3) * time.Millisecond)}, true},
		{"one attribute and a status", store.ListParams{Search: map[string]string{"customer": "c7"}, Status: "RUNNING"}, false},
	} {
		p := c.p
		if err := p.Normalize(); err != nil {
			t.Fatal(err)
		}
		sql, args, _, err := listSQL(p)
		if err != nil {
			t.Fatal(err)
		}
		custom, generic := explain(t, s, "(ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)", sql, args...)
		for kind, plan := range map[string]string{"custom": custom, "generic": generic} {
			if !strings.Contains(plan, "workflow_search_value_idx") {
				t.Errorf("%s, %s plan: does not read workflow_search_value_idx:\n%s", c.name, kind, plan)
			}
			bad := []string{"Seq Scan", "Hash", "Sort"}
			if c.probed {
				bad = bad[:2]
				if !strings.Contains(plan, "workflow_search_pkey on workflow_search s1") {
					t.Errorf("%s, %s plan: the second attribute is not looked up by primary key:\n%s", c.name, kind, plan)
				}
			}
			for _, b := range bad {
				if strings.Contains(plan, b) {
					t.Errorf("%s, %s plan: %s:\n%s", c.name, kind, b, plan)
				}
			}
		}
		t.Logf("%s, custom plan:\n%s", c.name, custom)
		t.Logf("%s: List of 50 takes %v (median of 21)", c.name, medianList(t, s, c.p))
	}
}

// medianList is the median time of 21 Lists with p, after one to warm up.
func medianList(t *testing.T, s *Store, p store.ListParams) time.Duration {
	t.Helper()
	var ds []time.Duration
	for i := range 22 {
		start := time.Now()
		page, err := s.List(t.Context(), p)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			ds = append(ds, time.Since(start))
		}
		if len(page.Instances) == 0 {
			t.Fatalf("List(%+v) found nothing", p)
		}
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}
