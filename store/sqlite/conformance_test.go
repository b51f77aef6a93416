package sqlite

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/store/storetest"
)

func TestConformance(t *testing.T) { storetest.Run(t, harness()) }

func BenchmarkStore(b *testing.B) { storetest.RunBenchmarks(b, harness()) }

// harness gives every subtest its own database file (not :memory:), so the
// suite exercises the two pools, WAL and BEGIN IMMEDIATE as production does.
func harness() storetest.Harness {
	return storetest.Harness{
		Name: "sqlite",
		NewDB: func(tb testing.TB) string {
			// t.TempDir is removed after the test's Cleanup functions ran,
			// so after the store is closed.
			return "sqlite:" + filepath.Join(tb.TempDir(), "flowd.db")
		},
		Open: func(tb testing.TB, addr string, now func() time.Time) store.Backend {
			tb.Helper()
			s, err := Open(tb.Context(), addr, Options{Now: now})
			if err != nil {
				tb.Fatalf("Open(%q): %v", addr, err)
			}
			tb.Cleanup(func() {
				if err := s.Close(); err != nil {
					tb.Errorf("Close: %v", err)
				}
			})
			return s
		},
		LeasedCounts: func(tb testing.TB, s store.Backend) map[string]int {
			tb.Helper()
			rows, err := s.(*Store).readDB.QueryContext(tb.Context(), `SELECT key, leased FROM task_concurrency`)
			if err != nil {
				tb.Fatal(err)
			}
			defer rows.Close()
			return storetest.ReadLeasedCounts(tb, rows)
		},
		SetLeased: func(tb testing.TB, s store.Backend, key string, n int) {
			tb.Helper()
			if _, err := s.(*Store).writeDB.ExecContext(tb.Context(), `UPDATE task_concurrency SET leased = ?2 WHERE key = ?1`, key, n); err != nil {
				tb.Fatal(err)
			}
		},
	}
}
