package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pressly/goose/v3"
	sqlitedriver "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/store/storetest"
	"github.com/flowd/flowd/workflow"
)

// openStore opens url and closes it when the test ends.
func openStore(tb testing.TB, url string) *Store {
	tb.Helper()
	s, err := Open(tb.Context(), url, Options{})
	if err != nil {
		tb.Fatalf("Open(%q): %v", url, err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return s
}

// migrate runs Migrate and fails tb on error.
func migrate(tb testing.TB, s *Store) store.MigrationReport {
	tb.Helper()
	rep, err := s.Migrate(tb.Context())
	if err != nil {
		tb.Fatalf("Migrate: %v", err)
	}
	return rep
}

// fileURL is the URL of a fresh database file in a test directory.
func fileURL(tb testing.TB) string {
	tb.Helper()
	return "sqlite:" + filepath.Join(tb.TempDir(), "flowd.db")
}

func sqliteCode(err error) int {
	var se *sqlitedriver.Error
	if errors.As(err, &se) {
		return se.Code()
	}
	return -1
}

// TestPragmas reads back every PRAGMA the DSN sets, on both pools: modernc
// silently ignores a misspelt _pragma key, so only reading them back proves
// they took effect.
func TestPragmas(t *testing.T) {
	t.Parallel()
	s := openStore(t, fileURL(t))
	ctx := t.Context()

	for _, pool := range []struct {
		name      string
		db        *sql.DB
		queryOnly int
	}{
		{"write", s.writeDB, 0},
		{"read", s.readDB, 1},
	} {
		conn, err := pool.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var (
			journal                   string
			busy, fk, sync, queryOnly int
		)
		for _, p := range []struct {
			pragma string
			dest   any
		}{
			{"journal_mode", &journal},
			{"busy_timeout", &busy},
			{"foreign_keys", &fk},
			{"synchronous", &sync},
			{"query_only", &queryOnly},
		} {
			if err := conn.QueryRowContext(ctx, "PRAGMA "+p.pragma).Scan(p.dest); err != nil {
				t.Fatalf("%s pool: PRAGMA %s: %v", pool.name, p.pragma, err)
			}
		}
		conn.Close()
		if journal != "wal" {
			t.Errorf("%s pool: journal_mode = %q, want wal", pool.name, journal)
		}
		if busy != int(busyTimeout.Milliseconds()) {
			t.Errorf("%s pool: busy_timeout = %d, want %d", pool.name, busy, busyTimeout.Milliseconds())
		}
		if fk != 1 {
			t.Errorf("%s pool: foreign_keys = %d, want 1", pool.name, fk)
		}
		if sync != 1 {
			t.Errorf("%s pool: synchronous = %d, want 1 (NORMAL)", pool.name, sync)
		}
		if queryOnly != pool.queryOnly {
			t.Errorf("%s pool: query_only = %d, want %d", pool.name, queryOnly, pool.queryOnly)
		}
	}
	if n := s.writeDB.Stats().MaxOpenConnections; n != 1 {
		t.Errorf("write pool allows %d connections, want exactly 1", n)
	}
}

// TestWriteTransactionsAreImmediate proves _txlock=immediate took effect: a
// transaction that has not run a statement yet already holds the write lock,
// so another connection's BEGIN IMMEDIATE (with no busy wait) fails.
func TestWriteTransactionsAreImmediate(t *testing.T) {
	t.Parallel()
	url := fileURL(t)
	s := openStore(t, url)
	path := strings.TrimPrefix(url, "sqlite:")
	probe, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(0)")
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()

	err = s.withWriteTx(t.Context(), func(dbtx) error {
		_, err := probe.ExecContext(t.Context(), "BEGIN IMMEDIATE")
		if err == nil {
			probe.ExecContext(t.Context(), "ROLLBACK")
			return errors.New("a second writer got the write lock while a write transaction was open: BEGIN is not IMMEDIATE")
		}
		if sqliteCode(err)&0xff != sqlite3.SQLITE_BUSY {
			return fmt.Errorf("probe BEGIN IMMEDIATE: got %v, want SQLITE_BUSY", err)
		}
		// And the contract's view of that failure:
		var ce *store.ConflictError
		if mapped := interpretError(t.Context(), err); !errors.As(mapped, &ce) || ce.Reason != "database is locked" || ce.Actual != -1 {
			return fmt.Errorf("interpretError(SQLITE_BUSY) = %#v, want ConflictError{Reason: database is locked, Actual: -1}", mapped)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestOpenBadURLs(t *testing.T) {
	t.Parallel()
	for _, url := range []string{
		"",
		"flowd.db",
		"postgres://localhost/flowd",
		"sqlite:",
		"sqlite://flowd.db",
		"sqlite:///tmp/flowd.db",
		"sqlite::memory",
		"sqlite::memory:?cache=shared",
		"sqlite:flowd.db?mode=ro",
		"sqlite3:flowd.db",
	} {
		s, err := Open(t.Context(), url, Options{})
		if err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded, want an error", url)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "sqlite:PATH") || !strings.Contains(msg, "sqlite::memory:") {
			t.Errorf("Open(%q) error %q does not name the accepted forms", url, msg)
		}
	}
}

func TestOpenNotADatabase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// A directory cannot be opened as a database file.
	if s, err := Open(t.Context(), "sqlite:"+dir, Options{}); err == nil {
		s.Close()
		t.Fatalf("Open of a directory succeeded")
	}
}

func TestOpenRelativePath(t *testing.T) {
	t.Chdir(t.TempDir())
	s := openStore(t, "sqlite:sub%dir#1.db")
	migrate(t, s)
	if _, err := s.Create(t.Context(), store.CreateParams{}); err != nil {
		t.Fatal(err)
	}
	// The odd characters reached the file name as they are.
	s2 := openStore(t, "sqlite:./sub%dir#1.db")
	page, err := s2.List(t.Context(), store.ListParams{})
	if err != nil || len(page.Instances) != 1 {
		t.Fatalf("second store on the same relative path: %d instances, %v", len(page.Instances), err)
	}
}

// TestMemory checks sqlite::memory: (one shared connection) under concurrent
// goroutines, and that each memory store is its own database.
func TestMemory(t *testing.T) {
	t.Parallel()
	s := openStore(t, "sqlite::memory:")
	ctx := t.Context()
	migrate(t, s)
	var fk int
	if err := s.readDB.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fk); err != nil || fk != 1 {
		t.Fatalf("memory: foreign_keys = %d, %v; want 1", fk, err)
	}

	inst, err := s.Create(ctx, store.CreateParams{ID: "counter"})
	if err != nil {
		t.Fatal(err)
	}
	const goroutines, perGoroutine = 16, 10
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			for i := range perGoroutine {
				if _, err := s.Create(ctx, store.CreateParams{ID: fmt.Sprintf("g%d-%d", g, i)}); err != nil {
					errs <- err
					return
				}
				if _, err := storetest.Modify(ctx, s, inst.ID, increment, "inc"); err != nil {
					errs <- err
					return
				}
				if _, err := s.List(ctx, store.ListParams{Limit: 5}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, inst.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(goroutines * perGoroutine); got.Version != want || counter(t, got) != want {
		t.Fatalf("version %d, counter %d; want %d", got.Version, counter(t, got), want)
	}

	other := openStore(t, "sqlite::memory:")
	if _, err := other.Get(ctx, inst.ID); err == nil {
		t.Fatalf("a second memory store sees the first one's data")
	}
}

func increment(inst *workflow.Instance) error { return incrementState(&inst.State) }

func incrementState(st *workflow.State) error {
	var n int64
	if _, err := st.Var("counter", &n); err != nil {
		return err
	}
	return st.SetVar("counter", n+1)
}

func counter(tb testing.TB, inst *workflow.Instance) int64 {
	tb.Helper()
	var n int64
	if _, err := inst.State.Var("counter", &n); err != nil {
		tb.Fatal(err)
	}
	return n
}

// lockSpy passes every call through and counts "database is locked" errors,
// which UpdateWithRetry would otherwise retry silently.
type lockSpy struct {
	store.Querier
	locked *atomic.Int64
}

func (q lockSpy) count(err error) {
	var ce *store.ConflictError
	if errors.As(err, &ce) && ce.Reason != "" {
		q.locked.Add(1)
	}
}

func (q lockSpy) Get(ctx context.Context, id string) (*workflow.Instance, error) {
	inst, err := q.Querier.Get(ctx, id)
	q.count(err)
	return inst, err
}

func (q lockSpy) Apply(ctx context.Context, w *store.Write) (*workflow.Instance, error) {
	inst, err := q.Querier.Apply(ctx, w)
	q.count(err)
	return inst, err
}

// TestTwoStoresOneFile runs two Stores on one file, as two processes would,
// with 16 goroutines each doing optimistic read-modify-write increments of one
// counter: no update is lost, and BEGIN IMMEDIATE + busy_timeout mean no
// writer ever sees "database is locked" (only version conflicts, retried).
func TestTwoStoresOneFile(t *testing.T) {
	t.Parallel()
	url := fileURL(t)
	a, b := openStore(t, url), openStore(t, url)
	migrate(t, a)
	ctx := t.Context()
	inst, err := a.Create(ctx, store.CreateParams{ID: "shared"})
	if err != nil {
		t.Fatal(err)
	}

	const perStore, increments = 16, 15
	policy := store.RetryPolicy{Base: time.Millisecond, Factor: 2, Cap: 20 * time.Millisecond, MaxAttempts: 10000}
	var (
		successes, locked, conflicts atomic.Int64
		wg                           sync.WaitGroup
	)
	policy.OnRetry = func(int, error) { conflicts.Add(1) }
	errs := make(chan error, 2*perStore)
	for _, s := range []*Store{a, b} {
		q := lockSpy{Querier: s, locked: &locked}
		for range perStore {
			wg.Go(func() {
				for range increments {
					if _, err := store.UpdateWithRetry(ctx, q, inst.ID, policy, incrementState, "inc"); err != nil {
						errs <- err
						return
					}
					successes.Add(1)
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("UpdateWithRetry: %v", err)
	}
	got, err := b.Get(ctx, inst.ID)
	if err != nil {
		t.Fatal(err)
	}
	n := counter(t, got)
	t.Logf("%d increments, %d version conflicts retried", successes.Load(), conflicts.Load())
	if want := int64(2 * perStore * increments); successes.Load() != want || n != want || got.Version != want {
		t.Errorf("successes %d, counter %d, version %d; want all %d", successes.Load(), n, got.Version, want)
	}
	if locked.Load() != 0 {
		t.Errorf("%d \"database is locked\" errors, want 0", locked.Load())
	}
	hist, err := a.History(ctx, inst.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(hist)) != got.Version+1 {
		t.Errorf("%d history rows for version %d", len(hist), got.Version)
	}
}

// schemaVersion is the version of the newest embedded migration, and
// migrationCount how many there are (00025 is not one of them).
const (
	schemaVersion  = 27
	migrationCount = 27
)

// TestConcurrentMigrate migrates fresh files from two Stores at once, several
// times: both succeed, each migration is applied exactly once, and a further
// Migrate applies nothing.
//
// On a fresh file the two mostly collide creating goose's version table
// (goose retries that itself). In the odd rounds the version table exists
// already (as after a status query), so they collide on the first migration
// itself and the loser must notice that the winner applied it.
func TestConcurrentMigrate(t *testing.T) {
	t.Parallel()
	for round := range 6 {
		url := fileURL(t)
		stores := []*Store{openStore(t, url), openStore(t, url)}
		if round%2 == 1 {
			fsys, err := fs.Sub(migrations, "migrations")
			if err != nil {
				t.Fatal(err)
			}
			p, err := goose.NewProvider(goose.DialectSQLite3, stores[0].writeDB, fsys)
			if err != nil {
				t.Fatal(err)
			}
			if v, err := p.GetDBVersion(t.Context()); err != nil || v != 0 {
				t.Fatalf("creating the version table: version %d, %v", v, err)
			}
		}
		reports := make([]store.MigrationReport, len(stores))
		errs := make([]error, len(stores))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, s := range stores {
			wg.Go(func() {
				<-start
				reports[i], errs[i] = s.Migrate(t.Context())
			})
		}
		close(start)
		wg.Wait()
		applied := 0
		for i := range stores {
			if errs[i] != nil {
				t.Fatalf("round %d: store %d: Migrate: %v", round, i, errs[i])
			}
			if reports[i].Version != schemaVersion {
				t.Errorf("round %d: store %d: version %d, want %d", round, i, reports[i].Version, schemaVersion)
			}
			applied += len(reports[i].Applied)
		}
		if applied != migrationCount {
			t.Errorf("round %d: %d migrations applied in all, want each of the %d once: %+v", round, applied, migrationCount, reports)
		}
		for i, s := range stores {
			rep := migrate(t, s)
			if len(rep.Applied) != 0 || rep.Version != schemaVersion {
				t.Errorf("round %d: store %d: second Migrate = %+v, want nothing applied at version %d", round, i, rep, schemaVersion)
			}
		}
	}
}

func TestMigrateTwice(t *testing.T) {
	t.Parallel()
	s := openStore(t, fileURL(t))
	first := migrate(t, s)
	want := []store.AppliedMigration{{Version: 1, Name: "00001_init.sql"}, {Version: 2, Name: "00002_engine.sql"}, {Version: 3, Name: "00003_workers.sql"}, {Version: 4, Name: "00004_idempotency_keys.sql"}, {Version: 5, Name: "00005_delete.sql"}, {Version: 6, Name: "00006_history_patches.go"}, {Version: 7, Name: "00007_instance_output.sql"}, {Version: 8, Name: "00008_foreach_iterations.sql"}, {Version: 9, Name: "00009_events.sql"}, {Version: 10, Name: "00010_child_workflows.sql"}, {Version: 11, Name: "00011_definition_concurrency.go"}, {Version: 12, Name: "00012_task_flow_control.sql"}, {Version: 13, Name: "00013_schedules.sql"}, {Version: 14, Name: "00014_traceparent.sql"}, {Version: 15, Name: "00015_history_actor.sql"}, {Version: 16, Name: "00016_runaway_limits.sql"}, {Version: 17, Name: "00017_concurrency_slots.sql"}, {Version: 18, Name: "00018_orphan_tasks.sql"}, {Version: 19, Name: "00019_task_concurrency_rows.sql"}, {Version: 20, Name: "00020_held_tasks.sql"}, {Version: 21, Name: "00021_attempt_timeout.sql"}, {Version: 22, Name: "00022_claim_order.sql"}, {Version: 23, Name: "00023_step_records.sql"}, {Version: 24, Name: "00024_iteration_outputs.sql"}, {Version: 25, Name: "00025_search_attributes.sql"}, {Version: 26, Name: "00026_rerun_of.sql"}, {Version: 27, Name: "00027_bulk_operations.sql"}}
	if len(first.Applied) != len(want) || first.Version != schemaVersion {
		t.Fatalf("first Migrate = %+v, want %+v at version %d", first, want, schemaVersion)
	}
	for i, w := range want {
		if got := first.Applied[i]; got.Version != w.Version || got.Name != w.Name {
			t.Errorf("first Migrate applied[%d] = %+v, want %+v", i, got, w)
		}
	}
	second := migrate(t, s)
	if len(second.Applied) != 0 || second.Version != schemaVersion {
		t.Fatalf("second Migrate = %+v, want nothing applied at version %d", second, schemaVersion)
	}
}

// TestSchemaGuards checks the rules the schema enforces by itself, whatever
// the code does: history is append-only, versions are never negative.
func TestSchemaGuards(t *testing.T) {
	t.Parallel()
	s := openStore(t, fileURL(t))
	migrate(t, s)
	ctx := t.Context()
	inst, err := s.Create(ctx, store.CreateParams{})
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		`UPDATE workflow_history SET cause = 'rewritten' WHERE instance_id = ?1`,
		`DELETE FROM workflow_history WHERE instance_id = ?1`,
		`DELETE FROM workflow_history WHERE instance_id = 'no such instance'`,
	} {
		_, err := s.writeDB.ExecContext(ctx, stmt, inst.ID)
		if sqliteCode(err) != sqlite3.SQLITE_CONSTRAINT_TRIGGER && !strings.Contains(stmt, "no such") {
			t.Errorf("%s: got %v, want the append-only trigger to abort it", stmt, err)
		}
	}
	if hist, err := s.History(ctx, inst.ID, 0, 0); err != nil || len(hist) != 1 || hist[0].Cause != "create" {
		t.Errorf("history after the attempts: %+v, %v", hist, err)
	}

	for _, stmt := range []string{
		`UPDATE workflow_instances SET version = -1 WHERE id = ?1`,
		`INSERT INTO workflow_history (instance_id, version, status, state, at) VALUES (?1, -1, 'PENDING', '{}', 0)`,
		`UPDATE workflow_instances SET status = 'BOGUS' WHERE id = ?1`,
		`UPDATE workflow_instances SET state = 'not json' WHERE id = ?1`,
	} {
		_, err := s.writeDB.ExecContext(ctx, stmt, inst.ID)
		if sqliteCode(err) != sqlite3.SQLITE_CONSTRAINT_CHECK {
			t.Errorf("%s: got %v, want a CHECK violation", stmt, err)
		}
		if mapped := interpretError(ctx, err); !errors.Is(mapped, store.ErrInvalidArgument) {
			t.Errorf("%s: interpretError = %v, want ErrInvalidArgument", stmt, mapped)
		}
		var se *sqlitedriver.Error
		if errors.As(interpretError(ctx, err), &se) {
			t.Errorf("%s: interpretError lets the driver's error type out", stmt)
		}
	}
	got, err := s.Get(ctx, inst.ID)
	if err != nil || got.Version != 0 {
		t.Errorf("instance after the attempts: %+v, %v", got, err)
	}

	// Foreign keys are enforced: no history for an instance that does not exist.
	_, err = s.writeDB.ExecContext(ctx, `INSERT INTO workflow_history (instance_id, version, status, state, at) VALUES ('ghost', 0, 'PENDING', '{}', 0)`)
	if sqliteCode(err) != sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY {
		t.Errorf("history row for a missing instance: got %v, want a foreign key violation", err)
	}
}

// TestCompleteStepIDIsData completes steps whose ids would break a JSON path
// or SQL text if they were spliced into one.
func TestCompleteStepIDIsData(t *testing.T) {
	t.Parallel()
	s := openStore(t, "sqlite::memory:")
	migrate(t, s)
	ctx := t.Context()
	st, err := workflow.ParseState([]byte(`{"steps": {"a.b": {"status": "WAITING"}, "a": {"status": "WAITING"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	inst, err := s.Create(ctx, store.CreateParams{State: st})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{`a') OR 1=1 --`, `$.steps.a`, `a"b`, `a,}`, `b`} {
		_, err := storetest.CompleteStep(ctx, s, storetest.StepParams{ID: inst.ID, StepID: id, ExpectedVersion: 0})
		if !errors.Is(err, workflow.ErrUnknownStep) {
			t.Errorf("CompleteStep(%q) = %v, want ErrUnknownStep", id, err)
		}
	}
	out, err := storetest.CompleteStep(ctx, s, storetest.StepParams{ID: inst.ID, StepID: "a.b", Output: json.RawMessage(`{"ok": true}`)})
	if err != nil {
		t.Fatal(err)
	}
	if got := out.State.Steps["a.b"]; got.Status != workflow.StepCompleted || string(got.Output) != `{"ok":true}` {
		t.Errorf("step a.b = %+v", got)
	}
	if got := out.State.Steps["a"]; got.Status != workflow.StepWaiting {
		t.Errorf("step a changed too: %+v", got)
	}
}

func TestContextCancelled(t *testing.T) {
	t.Parallel()
	s := openStore(t, fileURL(t))
	migrate(t, s)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Create(ctx, store.CreateParams{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Create: %v, want context.Canceled", err)
	}
	if _, err := s.Get(ctx, "x"); !errors.Is(err, context.Canceled) {
		t.Errorf("Get: %v, want context.Canceled", err)
	}
	// A context cancelled while a transaction runs: the transaction is
	// rolled back, the write lock released, and the error is the context's.
	ctx, cancel = context.WithCancel(t.Context())
	err := s.inTx(ctx, func(tx *querier) error {
		cancel()
		_, err := tx.Create(ctx, store.CreateParams{ID: "late"})
		return err
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled transaction: %v, want context.Canceled", err)
	}
	if _, err := s.Create(t.Context(), store.CreateParams{}); err != nil {
		t.Errorf("write after a cancelled transaction: %v", err)
	}
	if _, err := s.Get(t.Context(), "late"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("instance written by a cancelled transaction: %v", err)
	}
}
