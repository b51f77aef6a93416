package postgres

import (
	"testing"

	"github.com/flowd/flowd/store/storetest"
)

// concurrencySlotsVersion is the migration that makes slots rows.
const concurrencySlotsVersion = 20

// TestConcurrencySlotsMigrationCountsInstancesInFlight: a database with
// holders and QUEUED instances of concurrency keys gets their counts, and
// its writes go on from them.
func TestConcurrencySlotsMigrationCountsInstancesInFlight(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openMigratedTo(t, concurrencySlotsVersion-1)
	for _, in := range storetest.LegacySlots() {
		if _, err := s.pool.Exec(ctx, `INSERT INTO workflow_instances (id, definition, status, state, input, version, created_at, updated_at, concurrency_key, concurrency_limit)
			VALUES ($1, $2, $3, '{}', '{}', 0, now(), now(), $4, $5)`, in.ID, in.Definition, string(in.Status), in.Key, in.Limit); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	rows, err := s.pool.Query(ctx, `SELECT key, holders, queued FROM concurrency_slots WHERE definition = 'd'`)
	if err != nil {
		t.Fatal(err)
	}
	storetest.CheckLegacySlotCounts(t, rows)
	rows.Close()
	var triggers int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_trigger WHERE tgname = 'workflow_instances_concurrency_guard'`).Scan(&triggers); err != nil || triggers != 0 {
		t.Errorf("the guard trigger after the migration: %d, %v", triggers, err)
	}
	storetest.CheckLegacySlots(t, s)
}
