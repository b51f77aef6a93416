package postgres

import (
	"testing"
	"time"

	"github.com/flowd/flowd/internal/pgtest"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/store/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestConformance(t *testing.T) { storetest.Run(t, harness()) }

func BenchmarkStore(b *testing.B) { storetest.RunBenchmarks(b, harness()) }

// harness gives the conformance suite a fresh database per test on the
// throwaway cluster, and stores opened on it without migrating.
func harness() storetest.Harness {
	return storetest.Harness{
		Name:  "postgres",
		NewDB: pgtest.NewDatabase,
		Open: func(tb testing.TB, addr string, now func() time.Time) store.Backend {
			tb.Helper()
			s, err := Open(tb.Context(), addr, Options{Now: now})
			if err != nil {
				tb.Fatalf("postgres.Open: %v", err)
			}
			tb.Cleanup(func() { _ = s.Close() })
			return s
		},
		LeasedCounts: func(tb testing.TB, s store.Backend) map[string]int {
			tb.Helper()
			rows, err := s.(*Store).pool.Query(tb.Context(), `SELECT key, leased FROM task_concurrency`)
			if err != nil {
				tb.Fatal(err)
			}
			return storetest.ReadLeasedCounts(tb, rows)
		},
		SetLeased: func(tb testing.TB, s store.Backend, key string, n int) {
			tb.Helper()
			if _, err := s.(*Store).pool.Exec(tb.Context(), `UPDATE task_concurrency SET leased = $2 WHERE key = $1`, key, n); err != nil {
				tb.Fatal(err)
			}
		},
	}
}
