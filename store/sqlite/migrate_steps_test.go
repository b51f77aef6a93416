package sqlite

import (
	"testing"

	"github.com/flowd/flowd/store/storetest"
)

// stepRecordsVersion is the migration that stores each step's record in a
// row of its own.
const stepRecordsVersion = 23

// TestStepRecordsMigrationKeepsStates: the states of the instances in
// flight read the same after the migration, and writes go on from them.
func TestStepRecordsMigrationKeepsStates(t *testing.T) {
	t.Parallel()
	s := openStore(t, fileURL(t))
	ctx := t.Context()
	if err := s.migrateTo(ctx, stepRecordsVersion-1); err != nil {
		t.Fatalf("migrate to %d: %v", stepRecordsVersion-1, err)
	}
	for id, state := range storetest.LegacyStepStates() {
		if _, err := s.writeDB.ExecContext(ctx, `INSERT INTO workflow_instances (id, definition, status, state, input, version, created_at, updated_at)
			VALUES (?1, '', 'RUNNING', ?2, '{}', 1, 1, 1)`, id, state); err != nil {
			t.Fatal(err)
		}
	}
	migrate(t, s)
	var inRows int
	if err := s.readDB.QueryRowContext(ctx, `SELECT count(*) FROM workflow_instances WHERE state->'$.steps' <> '{}'`).Scan(&inRows); err != nil || inRows != 0 {
		t.Errorf("%d instance rows still hold step records (%v)", inRows, err)
	}
	storetest.CheckLegacySteps(t, s)
}
