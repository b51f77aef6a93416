package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// Schedules (store.ScheduleStore).

var _ store.ScheduleStore = (*Store)(nil)

const (
	scheduleColumns = `name, definition, cron, timezone, input, overlap, paused, catchup_window,
fired_until, last_fire_at, last_instance_id, buffered_fire_at, created_at, updated_at`

	// A replace keeps where the firing stands (fired_until, last fire,
	// buffered fire) and created_at; xmax = 0 tells an insert.
	putScheduleSQL = `INSERT INTO schedules (name, definition, cron, timezone, input, overlap, paused, catchup_window,
	fired_until, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5::text::json, $6, $7, $8, $9, $10, $10)
ON CONFLICT (name) DO UPDATE SET definition = excluded.definition, cron = excluded.cron,
	timezone = excluded.timezone, input = excluded.input, overlap = excluded.overlap,
	paused = excluded.paused, catchup_window = excluded.catchup_window, updated_at = excluded.updated_at
RETURNING ` + scheduleColumns + `, xmax = 0`

	getScheduleSQL    = `SELECT ` + scheduleColumns + ` FROM schedules WHERE name = $1`
	listSchedulesSQL  = `SELECT ` + scheduleColumns + ` FROM schedules ORDER BY name COLLATE "C"`
	deleteScheduleSQL = `DELETE FROM schedules WHERE name = $1`
	pauseScheduleSQL  = `UPDATE schedules SET paused = $2, updated_at = $3 WHERE name = $1 RETURNING ` + scheduleColumns

	// advanceScheduleSQL is the compare-and-set of a fire.
	advanceScheduleSQL = `UPDATE schedules SET fired_until = $4, buffered_fire_at = $5
WHERE name = $1 AND NOT paused AND fired_until = $2 AND buffered_fire_at IS NOT DISTINCT FROM $3`
	recordFireSQL   = `UPDATE schedules SET last_fire_at = $2, last_instance_id = $3 WHERE name = $1`
	scheduleSeenSQL = `SELECT EXISTS (SELECT 1 FROM schedules WHERE name = $1)`
	instanceSeenSQL = `SELECT EXISTS (SELECT 1 FROM workflow_instances WHERE id = $1)`
)

func scanSchedule(row pgx.Row, extra ...any) (*store.Schedule, error) {
	var (
		s      store.Schedule
		input  []byte
		window int64
	)
	dest := append([]any{&s.Name, &s.Definition, &s.Cron, &s.Timezone, &input, &s.Overlap, &s.Paused, &window,
		&s.FiredUntil, &s.LastFireAt, &s.LastInstanceID, &s.BufferedFireAt, &s.CreatedAt, &s.UpdatedAt}, extra...)
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	s.Input, s.CatchupWindow = input, time.Duration(window)
	s.FiredUntil, s.CreatedAt, s.UpdatedAt = s.FiredUntil.UTC(), s.CreatedAt.UTC(), s.UpdatedAt.UTC()
	s.LastFireAt, s.BufferedFireAt = utcPtr(s.LastFireAt), utcPtr(s.BufferedFireAt)
	return &s, nil
}

// PutSchedule creates or replaces the schedule s.Name.
func (s *Store) PutSchedule(ctx context.Context, sc store.Schedule) (*store.Schedule, bool, error) {
	if err := sc.Normalize(); err != nil {
		return nil, false, err
	}
	var created bool
	out, err := scanSchedule(s.pool.QueryRow(ctx, putScheduleSQL, sc.Name, sc.Definition, sc.Cron, sc.Timezone,
		string(sc.Input), sc.Overlap, sc.Paused, int64(sc.CatchupWindow), sc.FiredUntil, s.timestamp()), &created)
	if err != nil {
		return nil, false, commitOutcome(interpretError(err, ""))
	}
	return out, created, nil
}

// getSchedule returns the schedule name, or an error wrapping ErrNotFound.
func (s *Store) getSchedule(ctx context.Context, name string) (*store.Schedule, error) {
	out, err := scanSchedule(s.pool.QueryRow(ctx, getScheduleSQL, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ScheduleNotFound(name)
	}
	if err != nil {
		return nil, interpretError(err, "")
	}
	return out, nil
}

// ListSchedules returns every schedule by name, or the one p names.
func (s *Store) ListSchedules(ctx context.Context, p store.ListSchedulesParams) ([]*store.Schedule, error) {
	if p.Name != "" {
		sc, err := s.getSchedule(ctx, p.Name)
		if errors.Is(err, store.ErrNotFound) {
			return []*store.Schedule{}, nil
		}
		if err != nil {
			return nil, err
		}
		return []*store.Schedule{sc}, nil
	}
	rows, err := s.pool.Query(ctx, listSchedulesSQL)
	if err != nil {
		return nil, interpretError(err, "")
	}
	defer rows.Close()
	out := []*store.Schedule{}
	for rows.Next() {
		sc, err := scanSchedule(rows)
		if err != nil {
			return nil, interpretError(err, "")
		}
		out = append(out, sc)
	}
	if err := rows.Err(); err != nil {
		return nil, interpretError(err, "")
	}
	return out, nil
}

// DeleteSchedule deletes the schedule name.
func (s *Store) DeleteSchedule(ctx context.Context, name string) error {
	tag, err := s.pool.Exec(ctx, deleteScheduleSQL, name)
	if err != nil {
		return commitOutcome(interpretError(err, ""))
	}
	if tag.RowsAffected() == 0 {
		return store.ScheduleNotFound(name)
	}
	return nil
}

// SetSchedulePaused sets the paused flag of the schedule name.
func (s *Store) SetSchedulePaused(ctx context.Context, name string, paused bool) (*store.Schedule, error) {
	out, err := scanSchedule(s.pool.QueryRow(ctx, pauseScheduleSQL, name, paused, s.timestamp()))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ScheduleNotFound(name)
	}
	if err != nil {
		return nil, commitOutcome(interpretError(err, ""))
	}
	return out, nil
}

// FireSchedule advances the schedule guarded by what the caller read and
// creates the fire's instance, in one transaction.
func (s *Store) FireSchedule(ctx context.Context, f store.ScheduleFire) (*workflow.Instance, error) {
	var created *workflow.Instance
	err := s.runTx(ctx, pgx.ReadCommitted, func(q *querier) error {
		tag, err := q.db.Exec(ctx, advanceScheduleSQL, f.Name, store.Timestamp(f.FiredUntil), timestampPtr(f.BufferedFireAt),
			store.Timestamp(f.NewFiredUntil), timestampPtr(f.NewBufferedFireAt))
		if err != nil {
			return interpretError(err, "")
		}
		if tag.RowsAffected() == 0 {
			var seen bool
			if err := q.db.QueryRow(ctx, scheduleSeenSQL, f.Name).Scan(&seen); err != nil {
				return interpretError(err, "")
			}
			if !seen {
				return store.ScheduleNotFound(f.Name)
			}
			return &store.ConflictError{Actual: -1,
				Reason: fmt.Sprintf("schedule %q was fired, paused or replaced by another writer", f.Name)}
		}
		if f.Start == nil {
			return nil
		}
		// The row lock the UPDATE took orders this read after any other
		// fire of the schedule: an instance seen here was created by one
		// that committed.
		var exists bool
		if err := q.db.QueryRow(ctx, instanceSeenSQL, f.Start.ID).Scan(&exists); err != nil {
			return interpretError(err, "")
		}
		if !exists {
			inst, err := q.Create(ctx, *f.Start)
			if err != nil {
				return err
			}
			created = inst
		}
		_, err = q.db.Exec(ctx, recordFireSQL, f.Name, store.Timestamp(f.FireAt), f.Start.ID)
		return interpretError(err, "")
	})
	if err != nil {
		return nil, commitOutcome(err)
	}
	return created, nil
}
