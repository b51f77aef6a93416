package postgres

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/flowd/flowd/internal/pgtest"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/store/storetest"
)

// historyPatchesVersion is the migration that stores history as patches.
const historyPatchesVersion = 7

// historyInGoVersion is the migration that drops the SQL functions that
// made history rows.
const historyInGoVersion = 19

// historyFunctions counts the SQL functions of migration 00007.
func historyFunctions(t *testing.T, s *Store) int {
	t.Helper()
	var n int
	if err := s.pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_proc
		WHERE proname IN ('flowd_json_diff', 'flowd_json_apply', 'flowd_history_entry')`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// openMigratedTo opens a store on a fresh database migrated up to
// version, for a migration test to fill it as a former release left it.
func openMigratedTo(t *testing.T, version int64) *Store {
	t.Helper()
	s, err := Open(t.Context(), pgtest.NewDatabase(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if _, err := migrateProvider(t, s).UpTo(t.Context(), version); err != nil {
		t.Fatalf("migrate to %d: %v", version, err)
	}
	return s
}

// migrateProvider is goose over the embedded migrations, without the
// session lock (one test, one database).
func migrateProvider(t *testing.T, s *Store) *goose.Provider {
	t.Helper()
	fsys, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDB(*s.pool.Config().ConnConfig.Copy())
	t.Cleanup(func() { _ = db.Close() })
	p, err := goose.NewProvider(goose.DialectPostgres, db, fsys, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestHistoryMigration fills a database at the schema before history
// patches with whole states, migrates it and reads every version back;
// then writes on, migrates down and reads again.
func TestHistoryMigration(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, err := Open(ctx, pgtest.NewDatabase(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	p := migrateProvider(t, s)
	if _, err := p.UpTo(ctx, historyPatchesVersion-1); err != nil {
		t.Fatalf("migrate to %d: %v", historyPatchesVersion-1, err)
	}
	legacy := storetest.LegacyHistories()
	for _, inst := range legacy {
		last := inst.States[len(inst.States)-1]
		if _, err := s.pool.Exec(ctx, `INSERT INTO workflow_instances (id, status, state, input, version, created_at, updated_at)
			VALUES ($1, 'RUNNING', $2::jsonb, 'null', $3, now(), now())`, inst.ID, last, len(inst.States)-1); err != nil {
			t.Fatal(err)
		}
		for v, st := range inst.States {
			if _, err := s.pool.Exec(ctx, `INSERT INTO workflow_history (instance_id, version, status, state, at, cause)
				VALUES ($1, $2, 'RUNNING', $3::jsonb, now(), 'legacy')`, inst.ID, v, st); err != nil {
				t.Fatal(err)
			}
		}
	}
	before := map[string][][]byte{}
	for _, inst := range legacy {
		before[inst.ID] = storedStates(t, s, inst.ID)
	}
	rep, err := s.Migrate(ctx)
	if err != nil || len(rep.Applied) == 0 || rep.Applied[0].Version != historyPatchesVersion {
		t.Fatalf("Migrate = %+v, %v; want %d applied first", rep, err, historyPatchesVersion)
	}
	for _, inst := range legacy {
		storetest.CheckHistory(t, s, inst.ID, before[inst.ID])
	}
	// The rows were made by the SQL functions of migration 00007, which
	// the later migration that moved the policy to Go drops: they read the
	// same without them.
	if n := historyFunctions(t, s); n != 0 {
		t.Errorf("%d history functions left after the migration", n)
	}
	// Versions written before actors were recorded have an unknown one.
	hist, err := s.History(ctx, legacy[0].ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range hist {
		if e.Actor != store.ActorUnknown {
			t.Fatalf("legacy version %d: actor %q, want %q", e.Version, e.Actor, store.ActorUnknown)
		}
	}
	size, err := s.HistorySize(ctx, "legacy-growing")
	if err != nil {
		t.Fatal(err)
	}
	if size.Snapshots >= size.Versions/2 {
		t.Errorf("after the migration %d of %d versions are snapshots", size.Snapshots, size.Versions)
	}

	// Writes continue from the migrated rows.
	grown := legacy[0]
	want := before[grown.ID]
	cur, err := s.Get(ctx, grown.ID)
	if err != nil {
		t.Fatal(err)
	}
	cur.State.Variables["after"] = json.RawMessage(`[null]`)
	if _, err := storetest.Replace(ctx, s, grown.ID, cur.Version, cur.State, "after"); err != nil {
		t.Fatal(err)
	}
	after, err := s.Get(ctx, grown.ID)
	if err != nil {
		t.Fatal(err)
	}
	js, err := after.State.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, js)
	storetest.CheckHistory(t, s, grown.ID, want)

	// Down recreates the functions, then writes every state whole
	// (flowd_json_apply), the same states.
	if _, err := p.DownTo(ctx, historyInGoVersion-1); err != nil {
		t.Fatalf("migrate down to %d: %v", historyInGoVersion-1, err)
	}
	if n := historyFunctions(t, s); n != 3 {
		t.Errorf("%d history functions after migrating down to %d, want 3", n, historyInGoVersion-1)
	}
	if _, err := p.DownTo(ctx, historyPatchesVersion-1); err != nil {
		t.Fatalf("migrate down: %v", err)
	}
	var patches int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM workflow_history WHERE jsonb_typeof(state) <> 'object'`).Scan(&patches); err != nil {
		t.Fatal(err)
	}
	if patches != 0 {
		t.Errorf("%d patch rows after the down migration", patches)
	}
	if got := storedStates(t, s, grown.ID); !slices.EqualFunc(got, want, bytes.Equal) {
		t.Errorf("after the down migration the rows hold\n%s\nwant\n%s", bytes.Join(got, []byte("\n")), bytes.Join(want, []byte("\n")))
	}
}

// storedStates reads the states of id's history rows, version 0 first, as
// History would give them back: History itself reads only today's schema,
// and these rows were written (or rewritten) whole by an older one.
func storedStates(t *testing.T, s *Store, id string) [][]byte {
	t.Helper()
	ctx := t.Context()
	r, err := s.pool.Query(ctx, `SELECT state::text FROM workflow_history WHERE instance_id = $1 ORDER BY version`, id)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var rows []string
	for r.Next() {
		var st string
		if err := r.Scan(&st); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, st)
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	return storetest.WholeStates(t, rows)
}
