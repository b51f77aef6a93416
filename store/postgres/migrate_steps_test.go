package postgres

import (
	"testing"

	"github.com/flowd/flowd/store/storetest"
)

// stepRecordsVersion is the migration that stores each step's record in a
// row of its own.
const stepRecordsVersion = 26

// TestStepRecordsMigrationKeepsStates: the states of the instances in
// flight read the same after the migration, and writes go on from them.
func TestStepRecordsMigrationKeepsStates(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openAt(t, stepRecordsVersion-1)
	for id, state := range storetest.LegacyStepStates() {
		if _, err := s.pool.Exec(ctx, `INSERT INTO workflow_instances (id, definition, status, state, input, version, created_at, updated_at)
			VALUES ($1, '', 'RUNNING', $2, '{}', 1, now(), now())`, id, state); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var inRows int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM workflow_instances WHERE state->'steps' <> '{}'`).Scan(&inRows); err != nil || inRows != 0 {
		t.Errorf("%d instance rows still hold step records (%v)", inRows, err)
	}
	storetest.CheckLegacySteps(t, s)
}
