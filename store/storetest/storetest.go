// Package storetest is the conformance suite of the store contract: one set of
// tests and benchmarks that every backend (store/postgres, store/sqlite) runs
// through a Harness from its own _test.go files:
//
//	func TestConformance(t *testing.T) { storetest.Run(t, harness()) }
//	func BenchmarkStore(b *testing.B) { storetest.RunBenchmarks(b, harness()) }
//
// The suite is the executable form of the contract in package store: every
// subtest asserts the exact error a failed operation
// maps to (errors.Is / errors.As with the fields) and that the failure changed
// nothing. Each subtest gets a fresh database and an injected clock, so subtests
// run in parallel and never depend on each other's order.
//
// It must stay backend-agnostic: where backends legitimately differ it branches
// on store.Capabilities, never on a type or driver name, and it never imports a
// backend.
package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// Harness tells the suite how to get databases and stores of one backend.
type Harness struct {
	// Name is "postgres" or "sqlite": the name of the subtest the suite runs under.
	Name string
	// NewDB returns the address of a fresh, empty database, removed by tb.Cleanup.
	NewDB func(tb testing.TB) string
	// Open opens a store on addr WITHOUT migrating it. now == nil means
	// time.Now. The harness registers Close with tb.Cleanup.
	Open func(tb testing.TB, addr string, now func() time.Time) store.Backend
	// LeasedCounts reads the rows of LEASED counts of step concurrency
	// keys of a store Open returned, by key, and SetLeased overwrites
	// one (for a test of the guard that keeps them: a row a write did
	// not keep).
	LeasedCounts func(tb testing.TB, s store.Backend) map[string]int
	SetLeased    func(tb testing.TB, s store.Backend, key string, n int)
}

// conformanceTest is one subtest of Run.
type conformanceTest struct {
	name string
	fn   func(t *testing.T, h Harness)
}

// Run runs the whole conformance suite against the backend h describes, as
// subtests of t.Run(h.Name, …). Every subtest is parallel.
func Run(t *testing.T, h Harness) {
	t.Run(h.Name, func(t *testing.T) {
		for _, groups := range [][]conformanceTest{
			createTests, listTests, idPrefixTests, childTests, workerTests, updateTests, modifyTests, retryTests,
			transitionTests, stepTests, hostileTests, batchTests,
			historyTests, historyStorageTests, idempotencyTests, migrateTests, miscTests, stopStepsTests, heldTests,
			engineInstanceTests, taskTests, claimTaskTests, groupClaimTests, applyGroupTests, dueTests, definitionTests,
			deleteTests, deleteTreeTests, retentionTests, eventTests, scheduleTests,
			linearizabilityTests, applyTests, applyTasksTests, outputTests, concurrencyTests, traceTests, flowControlTests,
			actorTests, descendantTests, applyEachTests, inFlightTests, rerunTests, bulkTests, searchTests,
		} {
			for _, tc := range groups {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					tc.fn(t, h)
				})
			}
		}
	})
}

// NewInstance creates an instance from p through q and fails tb on error. The
// store fills the defaults (server-generated id, PENDING, input {}).
func NewInstance(tb testing.TB, q store.Querier, p store.CreateParams) *workflow.Instance {
	tb.Helper()
	inst, err := q.Create(tb.Context(), p)
	if err != nil {
		tb.Fatalf("Create(%+v): %v", p, err)
	}
	return inst
}

// bundle is what one subtest works with: a migrated store on a fresh database
// and the clock that store reads.
type bundle struct {
	s     store.Backend
	clock *clock
	addr  string
	ctx   context.Context
}

// setup opens a store on a fresh, migrated database with an injected clock.
func setup(t testing.TB, h Harness) *bundle {
	t.Helper()
	c := newClock()
	addr := h.NewDB(t)
	s := h.Open(t, addr, c.Now)
	if _, err := s.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return &bundle{s: s, clock: c, addr: addr, ctx: t.Context()}
}

// clockStart is deliberately not UTC and not a whole microsecond: stores must
// convert what the clock says with store.Timestamp.
var clockStart = time.Date(2026, 5, 17, 10, 20, 30, 123456789, time.FixedZone("UTC+5", 5*3600))

// clock is a manual clock for Options.Now: it only moves when told to.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: clockStart} }

// Now returns the clock's current time.
func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d and returns the new time.
func (c *clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// Set moves the clock to t and returns t.
func (c *clock) Set(t time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
	return t
}
