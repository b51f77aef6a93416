package sqlite

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"slices"
	"testing"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/store/storetest"
)

// migrateTo applies the migrations up to version only.
func (s *Store) migrateTo(ctx context.Context, version int64) error {
	fsys, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return err
	}
	p, err := s.migrationProvider(fsys)
	if err != nil {
		return err
	}
	_, err = p.UpTo(ctx, version)
	return err
}

// TestHistoryMigration fills a database at the schema before history
// patches with whole states, migrates it and reads every version back;
// then writes on, migrates down and reads again.
func TestHistoryMigration(t *testing.T) {
	t.Parallel()
	s := openStore(t, fileURL(t))
	ctx := t.Context()
	if err := s.migrateTo(ctx, historyPatchesVersion-1); err != nil {
		t.Fatalf("migrate to %d: %v", historyPatchesVersion-1, err)
	}
	legacy := storetest.LegacyHistories()
	for _, inst := range legacy {
		last := inst.States[len(inst.States)-1]
		if _, err := s.writeDB.ExecContext(ctx, `INSERT INTO workflow_instances (id, status, state, input, version, created_at, updated_at)
			VALUES (?1, 'RUNNING', ?2, 'null', ?3, 1, 1)`, inst.ID, last, len(inst.States)-1); err != nil {
			t.Fatal(err)
		}
		for v, st := range inst.States {
			if _, err := s.writeDB.ExecContext(ctx, `INSERT INTO workflow_history (instance_id, version, status, state, at, cause)
				VALUES (?1, ?2, 'RUNNING', ?3, ?2, 'legacy')`, inst.ID, v, st); err != nil {
				t.Fatal(err)
			}
		}
	}
	before := map[string][][]byte{}
	for _, inst := range legacy {
		before[inst.ID] = storedStates(t, s, inst.ID)
	}
	// The later migrations follow it (they change nothing of history).
	if rep := migrate(t, s); len(rep.Applied) == 0 || rep.Applied[0].Version != historyPatchesVersion {
		t.Fatalf("Migrate = %+v, want %d applied first", rep, historyPatchesVersion)
	}
	for _, inst := range legacy {
		storetest.CheckHistory(t, s, inst.ID, before[inst.ID])
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

	// Down writes every state whole, the same states.
	p, err := s.migrationProvider(mustSub(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, historyPatchesVersion-1); err != nil {
		t.Fatalf("migrate down: %v", err)
	}
	// (Read directly: the store's HistorySize reads the schema of today.)
	var versions, snapshots int
	if err := s.readDB.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(json_type(state) = 'object'), 0)
		FROM workflow_history WHERE instance_id = ?1`, grown.ID).Scan(&versions, &snapshots); err != nil || snapshots != versions {
		t.Errorf("after the down migration: %d snapshots of %d versions, %v; want every version whole", snapshots, versions, err)
	}
	if got := storedStates(t, s, grown.ID); !slices.EqualFunc(got, want, bytes.Equal) {
		t.Errorf("after the down migration the rows hold\n%s\nwant\n%s", bytes.Join(got, []byte("\n")), bytes.Join(want, []byte("\n")))
	}
}

func mustSub(t *testing.T) fs.FS {
	t.Helper()
	fsys, err := fs.Sub(migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	return fsys
}

// storedStates reads the states of id's history rows, version 0 first, as
// History would give them back: History itself reads only today's schema,
// and these rows were written (or rewritten) whole by an older one.
func storedStates(t *testing.T, s *Store, id string) [][]byte {
	t.Helper()
	ctx := t.Context()
	r, err := s.readDB.QueryContext(ctx, `SELECT state FROM workflow_history WHERE instance_id = ?1 ORDER BY version`, id)
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
