package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// Schedules (store.ScheduleStore).

var _ store.ScheduleStore = (*Store)(nil)

const scheduleColumns = `name, definition, cron, timezone, input, overlap, paused, catchup_window,
fired_until, last_fire_at, last_instance_id, buffered_fire_at, created_at, updated_at`

type rowScanner interface{ Scan(dest ...any) error }

func scanSchedule(row rowScanner) (*store.Schedule, error) {
	var (
		s                           store.Schedule
		input                       string
		window, fired, created, upd int64
		lastFire, buffered          sql.NullInt64
	)
	if err := row.Scan(&s.Name, &s.Definition, &s.Cron, &s.Timezone, &input, &s.Overlap, &s.Paused, &window,
		&fired, &lastFire, &s.LastInstanceID, &buffered, &created, &upd); err != nil {
		return nil, err
	}
	s.Input, s.CatchupWindow = []byte(input), time.Duration(window)
	s.FiredUntil, s.CreatedAt, s.UpdatedAt = fromMicros(fired), fromMicros(created), fromMicros(upd)
	s.LastFireAt, s.BufferedFireAt = optMicros(lastFire), optMicros(buffered)
	return &s, nil
}

func optMicros(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMicros(v.Int64)
	return &t
}

// PutSchedule creates or replaces the schedule s.Name; a replace keeps where
// the firing stands and created_at.
func (q *querier) PutSchedule(ctx context.Context, sc store.Schedule) (*store.Schedule, bool, error) {
	if err := sc.Normalize(); err != nil {
		return nil, false, err
	}
	var (
		out     *store.Schedule
		created bool
	)
	now := q.timestamp()
	err := q.write(ctx, func(c dbtx) error {
		var n int
		if err := c.QueryRowContext(ctx, `SELECT count(*) FROM schedules WHERE name = ?1`, sc.Name).Scan(&n); err != nil {
			return interpretError(ctx, err)
		}
		created = n == 0
		_, err := c.ExecContext(ctx, `INSERT INTO schedules (name, definition, cron, timezone, input, overlap, paused,
			catchup_window, fired_until, created_at, updated_at)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10)
		ON CONFLICT (name) DO UPDATE SET definition = excluded.definition, cron = excluded.cron,
			timezone = excluded.timezone, input = excluded.input, overlap = excluded.overlap,
			paused = excluded.paused, catchup_window = excluded.catchup_window, updated_at = excluded.updated_at`,
			sc.Name, sc.Definition, sc.Cron, sc.Timezone, string(sc.Input), sc.Overlap, sc.Paused,
			int64(sc.CatchupWindow), micros(sc.FiredUntil), now)
		if err != nil {
			return interpretError(ctx, err)
		}
		out, err = scanSchedule(c.QueryRowContext(ctx, `SELECT `+scheduleColumns+` FROM schedules WHERE name = ?1`, sc.Name))
		return interpretError(ctx, err)
	})
	if err != nil {
		return nil, false, err
	}
	return out, created, nil
}

// getSchedule returns the schedule name, or an error wrapping ErrNotFound.
func (q *querier) getSchedule(ctx context.Context, name string) (*store.Schedule, error) {
	out, err := scanSchedule(q.read.QueryRowContext(ctx, `SELECT `+scheduleColumns+` FROM schedules WHERE name = ?1`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ScheduleNotFound(name)
	}
	if err != nil {
		return nil, interpretError(ctx, err)
	}
	return out, nil
}

// ListSchedules returns every schedule by name, or the one p names (bytewise, as on PostgreSQL).
func (q *querier) ListSchedules(ctx context.Context, p store.ListSchedulesParams) ([]*store.Schedule, error) {
	if p.Name != "" {
		sc, err := q.getSchedule(ctx, p.Name)
		if errors.Is(err, store.ErrNotFound) {
			return []*store.Schedule{}, nil
		}
		if err != nil {
			return nil, err
		}
		return []*store.Schedule{sc}, nil
	}
	rows, err := q.read.QueryContext(ctx, `SELECT `+scheduleColumns+` FROM schedules ORDER BY name`)
	if err != nil {
		return nil, interpretError(ctx, err)
	}
	defer rows.Close()
	out := []*store.Schedule{}
	for rows.Next() {
		sc, err := scanSchedule(rows)
		if err != nil {
			return nil, interpretError(ctx, err)
		}
		out = append(out, sc)
	}
	if err := rows.Err(); err != nil {
		return nil, interpretError(ctx, err)
	}
	return out, nil
}

// DeleteSchedule deletes the schedule name.
func (q *querier) DeleteSchedule(ctx context.Context, name string) error {
	return q.write(ctx, func(c dbtx) error {
		res, err := c.ExecContext(ctx, `DELETE FROM schedules WHERE name = ?1`, name)
		if err != nil {
			return interpretError(ctx, err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			if err != nil {
				return interpretError(ctx, err)
			}
			return store.ScheduleNotFound(name)
		}
		return nil
	})
}

// SetSchedulePaused sets the paused flag of the schedule name.
func (q *querier) SetSchedulePaused(ctx context.Context, name string, paused bool) (*store.Schedule, error) {
	var out *store.Schedule
	now := q.timestamp()
	err := q.write(ctx, func(c dbtx) error {
		var err error
		out, err = scanSchedule(c.QueryRowContext(ctx,
			`UPDATE schedules SET paused = ?2, updated_at = ?3 WHERE name = ?1 RETURNING `+scheduleColumns, name, paused, now))
		if errors.Is(err, sql.ErrNoRows) {
			return store.ScheduleNotFound(name)
		}
		return interpretError(ctx, err)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// FireSchedule advances the schedule guarded by what the caller read and
// creates the fire's instance, in one transaction (SQLite has one writer:
// the guard and the create see the same snapshot).
func (s *Store) FireSchedule(ctx context.Context, f store.ScheduleFire) (*workflow.Instance, error) {
	var created *workflow.Instance
	err := s.inTx(ctx, func(q *querier) error {
		err := q.write(ctx, func(c dbtx) error {
			res, err := c.ExecContext(ctx, `UPDATE schedules SET fired_until = ?4, buffered_fire_at = ?5
				WHERE name = ?1 AND NOT paused AND fired_until = ?2 AND buffered_fire_at IS ?3`,
				f.Name, micros(f.FiredUntil), nullMicros(f.BufferedFireAt), micros(f.NewFiredUntil), nullMicros(f.NewBufferedFireAt))
			if err != nil {
				return interpretError(ctx, err)
			}
			if n, err := res.RowsAffected(); err != nil {
				return interpretError(ctx, err)
			} else if n > 0 {
				return nil
			}
			var seen int
			if err := c.QueryRowContext(ctx, `SELECT count(*) FROM schedules WHERE name = ?1`, f.Name).Scan(&seen); err != nil {
				return interpretError(ctx, err)
			}
			if seen == 0 {
				return store.ScheduleNotFound(f.Name)
			}
			return &store.ConflictError{Actual: -1,
				Reason: fmt.Sprintf("schedule %q was fired, paused or replaced by another writer", f.Name)}
		})
		if err != nil || f.Start == nil {
			return err
		}
		var exists int
		if err := q.read.QueryRowContext(ctx, `SELECT count(*) FROM workflow_instances WHERE id = ?1`, f.Start.ID).Scan(&exists); err != nil {
			return interpretError(ctx, err)
		}
		if exists == 0 {
			inst, err := q.Create(ctx, *f.Start)
			if err != nil {
				return err
			}
			created = inst
		}
		return q.write(ctx, func(c dbtx) error {
			_, err := c.ExecContext(ctx, `UPDATE schedules SET last_fire_at = ?2, last_instance_id = ?3 WHERE name = ?1`,
				f.Name, micros(f.FireAt), f.Start.ID)
			return interpretError(ctx, err)
		})
	})
	if err != nil {
		return nil, err
	}
	return created, nil
}
