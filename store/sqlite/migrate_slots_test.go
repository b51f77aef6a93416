package sqlite

import (
	"testing"

	"github.com/flowd/flowd/store/storetest"
)

// concurrencySlotsVersion is the migration that makes slots rows.
const concurrencySlotsVersion = 17

// TestConcurrencySlotsMigrationCountsInstancesInFlight: a database with
// holders and QUEUED instances of concurrency keys gets their counts, and
// its writes go on from them.
func TestConcurrencySlotsMigrationCountsInstancesInFlight(t *testing.T) {
	t.Parallel()
	s := openStore(t, fileURL(t))
	ctx := t.Context()
	if err := s.migrateTo(ctx, concurrencySlotsVersion-1); err != nil {
		t.Fatalf("migrate to %d: %v", concurrencySlotsVersion-1, err)
	}
	for _, in := range storetest.LegacySlots() {
		if _, err := s.writeDB.ExecContext(ctx, `INSERT INTO workflow_instances (id, definition, status, state, input, version, created_at, updated_at, concurrency_key, concurrency_limit)
			VALUES (?1, ?2, ?3, '{}', '{}', 0, 1, 1, ?4, ?5)`, in.ID, in.Definition, string(in.Status), in.Key, in.Limit); err != nil {
			t.Fatal(err)
		}
	}
	migrate(t, s)
	rows, err := s.writeDB.QueryContext(ctx, `SELECT key, holders, queued FROM concurrency_slots WHERE definition = 'd'`)
	if err != nil {
		t.Fatal(err)
	}
	storetest.CheckLegacySlotCounts(t, rows)
	_ = rows.Close()
	var triggers int
	if err := s.writeDB.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'trigger' AND name LIKE 'workflow_instances_concurrency_%'`).Scan(&triggers); err != nil || triggers != 0 {
		t.Errorf("the guard triggers after the migration: %d, %v", triggers, err)
	}
	storetest.CheckLegacySlots(t, s)
}
