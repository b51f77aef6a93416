package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/schedule"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// Schedules: every node runs a scheduler that starts the instances of the
// schedules' fire times. Exactly one instance per fire time, across nodes:
// a fire is one guarded store write (store.ScheduleStore.FireSchedule) that
// advances the schedule's fired_until from the value this node read and
// creates the instance, with the deterministic id
// store.ScheduleInstanceID(name, fire time); a node that read the same value
// misses the guard and reads again, and an instance already there (created
// by a backfill, a trigger, or a fire whose advance never landed) counts as
// fired.

// MaxBackfill bounds the fire times of one backfill.
const MaxBackfill = 1000

// maxMissesPerWrite bounds the fire times one advance past the catch-up
// window counts, so that a schedule paused for a year at @every 1s is worked
// off in bounded steps instead of one long loop.
const maxMissesPerWrite = 10000

// scheduleRounds bounds the writes one schedule gets in one round of the
// scheduler; what is left waits for the next round.
const scheduleRounds = 100

// errFiredBefore: the fire's instance already existed; the schedule advanced.
var errFiredBefore = errors.New("the fire time's instance already exists")

// ScheduleProblems lists every problem of s — name, definition, cron, time
// zone, overlap, catch-up window — so that one answer can name them all.
// It does no I/O: whether the definition exists is PutSchedule's to check.
func ScheduleProblems(s store.Schedule) []string {
	problems := s.Problems()
	var err error
	if s.Cron == "" {
		// Problems says the cron is missing; the zone is still checked.
		_, err = schedule.LoadZone(s.Timezone)
	} else {
		_, err = schedule.Parse(s.Cron, s.Timezone)
	}
	if se := (*schedule.Error)(nil); errors.As(err, &se) {
		problems = append(problems, se.Problems...)
	} else if err != nil {
		problems = append(problems, err.Error())
	}
	return problems
}

// PutSchedule checks s (its cron, time zone and definition) and stores it:
// created or replaced. A new schedule fires the fire times after now.
// Errors: a *store.ScheduleError (errors.Is store.ErrInvalidArgument)
// naming every problem ScheduleProblems finds, an error wrapping
// store.ErrNotFound for an unknown definition.
func (e *Engine) PutSchedule(ctx context.Context, s store.Schedule) (*store.Schedule, bool, error) {
	if s.Timezone == "" {
		s.Timezone = "UTC"
	}
	s.FiredUntil = e.clock()
	if problems := ScheduleProblems(s); len(problems) > 0 {
		return nil, false, &store.ScheduleError{Problems: problems}
	}
	if err := s.Normalize(); err != nil {
		return nil, false, err
	}
	if _, err := e.compiled(ctx, s.Definition, 0); err != nil {
		return nil, false, err
	}
	return e.schedules().PutSchedule(ctx, s)
}

func (e *Engine) schedules() store.ScheduleStore { return e.st }

// NextFireTimes returns the next n fire times of s after now (whether or
// not it is paused), in UTC.
func (e *Engine) NextFireTimes(s *store.Schedule, n int) ([]time.Time, error) {
	c, err := schedule.Parse(s.Cron, s.Timezone)
	if err != nil {
		return nil, err
	}
	after := e.clock()
	if s.FiredUntil.After(after) {
		after = s.FiredUntil
	}
	ts, err := c.NextN(after, n)
	for i := range ts {
		ts[i] = ts[i].UTC()
	}
	return ts, err
}

// TriggerSchedule starts an instance of the schedule now, whatever its
// overlap policy and paused flag, with the id of the current second
// (store.ScheduleInstanceID). A second trigger in the same second, or one
// at the second of a fire that already started, returns an error wrapping
// store.ErrExists. Errors: store.ErrNotFound for an unknown schedule.
func (e *Engine) TriggerSchedule(ctx context.Context, name string) (*workflow.Instance, error) {
	s, err := store.GetSchedule(ctx, e.schedules(), name)
	if err != nil {
		return nil, err
	}
	id := store.ScheduleInstanceID(s.Name, e.clock())
	inst, err := e.StartWorkflow(ctx, StartParams{ID: id, Definition: s.Definition, Input: s.Input})
	if errors.Is(err, store.ErrExists) {
		return nil, fmt.Errorf("schedule %q was already triggered (or fired) this second: instance %s %w", name, id, store.ErrExists)
	}
	return inst, err
}

// BackfillResult is what a backfill did: the ids it created and those that
// existed already (fired, triggered, or backfilled before), by fire time.
type BackfillResult = api.BackfillResponse

// BackfillSchedule starts one instance per fire time of the schedule in
// [from, to], with the fire time's id, so a repeated backfill creates
// nothing new. Errors: store.ErrNotFound; store.ErrInvalidArgument when to
// is before from or the range has more than MaxBackfill fire times
// (nothing is started then).
func (e *Engine) BackfillSchedule(ctx context.Context, name string, from, to time.Time) (*BackfillResult, error) {
	if to.Before(from) {
		return nil, fmt.Errorf("%w: backfill: to (%s) is before from (%s)", store.ErrInvalidArgument, to.Format(time.RFC3339), from.Format(time.RFC3339))
	}
	s, err := store.GetSchedule(ctx, e.schedules(), name)
	if err != nil {
		return nil, err
	}
	c, err := schedule.Parse(s.Cron, s.Timezone)
	if err != nil {
		return nil, err
	}
	var times []time.Time
	for t, err := c.Next(from.Add(-time.Nanosecond)); !t.After(to); t, err = c.Next(t) {
		if err != nil {
			return nil, err
		}
		if len(times) == MaxBackfill {
			return nil, fmt.Errorf("%w: backfill: [%s, %s] has more than %d fire times; backfill a shorter range at a time",
				store.ErrInvalidArgument, from.Format(time.RFC3339), to.Format(time.RFC3339), MaxBackfill)
		}
		times = append(times, t)
	}
	res := &BackfillResult{Created: []string{}, Existing: []string{}}
	for _, t := range times {
		id := store.ScheduleInstanceID(s.Name, t)
		_, err := e.StartWorkflow(ctx, StartParams{ID: id, Definition: s.Definition, Input: s.Input})
		switch {
		case errors.Is(err, store.ErrExists):
			res.Existing = append(res.Existing, id)
		case err != nil:
			return res, fmt.Errorf("backfill of %s: %w", id, err)
		default:
			res.Created = append(res.Created, id)
		}
	}
	return res, nil
}

// scheduler runs FireSchedules every ScheduleInterval until ctx ends.
func (e *Engine) scheduler(ctx context.Context) {
	t := time.NewTicker(e.scheduleEvery)
	defer t.Stop()
	for {
		if err := e.FireSchedules(ctx); err != nil && ctx.Err() == nil {
			e.log.Warn("scheduling failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// FireSchedules does one round of the scheduler at the engine's clock: for
// every schedule that is not paused, the fire times due since its
// fired_until are started, buffered or missed (see fireDue). Every node
// calls it; the guarded writes keep them from firing one time twice.
func (e *Engine) FireSchedules(ctx context.Context) error {
	list, err := e.schedules().ListSchedules(ctx, store.ListSchedulesParams{})
	if err != nil {
		return fmt.Errorf("listing schedules: %w", err)
	}
	for _, s := range list {
		if s.Paused {
			continue
		}
		if err := e.fireDue(ctx, s); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			e.log.Warn("schedule fire failed", "schedule", s.Name, "err", err)
		}
	}
	return nil
}

// fireDue works off the due fire times of s, one guarded write each:
//   - a buffered fire (overlap buffer_one) starts once the previous
//     instance finished;
//   - a fire time more than the catch-up window old is a miss;
//   - otherwise the overlap policy decides, while the previous instance
//     this schedule started is not finished (a status that stops steps):
//     skip misses it, allow starts it, buffer_one keeps it waiting (a miss
//     when one already waits), cancel_other cancels the previous one and
//     starts it.
//
// A write that misses its guard (another node fired, the schedule was
// paused, replaced or deleted) reads the schedule again.
func (e *Engine) fireDue(ctx context.Context, s *store.Schedule) error {
	c, err := schedule.Parse(s.Cron, s.Timezone)
	if err != nil {
		return err
	}
	for range scheduleRounds {
		err := e.fireNext(ctx, s, c)
		if errors.Is(err, errNothingDue) {
			return nil
		}
		if errors.Is(err, store.ErrConflict) {
			err = nil
		}
		if err != nil {
			return err
		}
		if s, err = store.GetSchedule(ctx, e.schedules(), s.Name); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return nil // deleted meanwhile
			}
			return err
		}
		if s.Paused {
			return nil
		}
	}
	return nil
}

var errNothingDue = errors.New("nothing due")

// fireNext makes the one write of s's next due fire, or returns
// errNothingDue.
func (e *Engine) fireNext(ctx context.Context, s *store.Schedule, c *schedule.Cron) error {
	now := e.clock()
	guard := store.ScheduleFire{Name: s.Name, FiredUntil: s.FiredUntil, BufferedFireAt: s.BufferedFireAt,
		NewFiredUntil: s.FiredUntil, NewBufferedFireAt: s.BufferedFireAt}
	if s.BufferedFireAt != nil {
		running, err := e.previousRunning(ctx, s)
		if err != nil {
			return err
		}
		if !running {
			f := guard
			f.NewBufferedFireAt = nil
			return e.startFire(ctx, s, f, *s.BufferedFireAt)
		}
	}
	next, err := c.Next(s.FiredUntil)
	if err != nil {
		return err
	}
	if next.After(now) {
		return errNothingDue
	}
	if now.Sub(next) > s.CatchupWindow {
		// Every fire time up to now - window is missed, in one write.
		last, n := next, 1
		for n < maxMissesPerWrite {
			t, err := c.Next(last)
			if err != nil || now.Sub(t) <= s.CatchupWindow {
				break
			}
			last, n = t, n+1
		}
		f := guard
		f.NewFiredUntil = last
		return e.missFires(ctx, f, n, "older than the catch-up window")
	}
	f := guard
	f.NewFiredUntil = next
	// Only a due fire reads the previous instance: a schedule waiting for
	// its next fire time costs the scheduler no read but the list.
	running, err := e.previousRunning(ctx, s)
	if err != nil {
		return err
	}
	if running {
		switch s.Overlap {
		case store.OverlapSkip:
			return e.missFires(ctx, f, 1, "overlap skip: the previous instance is still running")
		case store.OverlapBufferOne:
			if s.BufferedFireAt != nil {
				return e.missFires(ctx, f, 1, "overlap buffer_one: a fire already waits")
			}
			f.NewBufferedFireAt = &next
			_, err := e.schedules().FireSchedule(ctx, f)
			return err
		case store.OverlapCancelOther:
			if _, err := e.Action(ctx, s.LastInstanceID, "cancel"); err != nil &&
				!errors.Is(err, ErrActionNotAllowed) && !errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("overlap cancel_other: cancelling %s: %w", s.LastInstanceID, err)
			}
		}
	}
	return e.startFire(ctx, s, f, next)
}

// previousRunning reports whether the last instance s started has not
// finished (a status that stops steps). A deleted one has.
func (e *Engine) previousRunning(ctx context.Context, s *store.Schedule) (bool, error) {
	if s.LastInstanceID == "" || s.Overlap == store.OverlapAllow && s.BufferedFireAt == nil {
		return false, nil
	}
	inst, err := e.st.Get(ctx, s.LastInstanceID)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return !inst.Status.StopsSteps(), nil
}

// missFires advances s past n fire times that start nothing.
func (e *Engine) missFires(ctx context.Context, f store.ScheduleFire, n int, why string) error {
	if _, err := e.schedules().FireSchedule(ctx, f); err != nil {
		return err
	}
	if e.m != nil {
		e.m.ScheduleMisses.WithLabelValues(f.Name).Add(float64(n))
	}
	e.log.Info("schedule fire missed", "schedule", f.Name, "fire_times", n, "until", f.NewFiredUntil, "why", why)
	return nil
}

// startFire starts the instance of fire time at, written with f's advance.
// A definition that no longer exists makes the fire a miss.
func (e *Engine) startFire(ctx context.Context, s *store.Schedule, f store.ScheduleFire, at time.Time) error {
	id := store.ScheduleInstanceID(s.Name, at)
	f.FireAt = at
	write := func(ctx context.Context, p store.CreateParams) (*workflow.Instance, error) {
		f.Start = &p
		inst, err := e.schedules().FireSchedule(ctx, f)
		if err == nil && inst == nil {
			return nil, errFiredBefore
		}
		return inst, err
	}
	_, err := e.StartWorkflow(ctx, StartParams{ID: id, Definition: s.Definition, Input: json.RawMessage(s.Input), write: write})
	switch {
	case errors.Is(err, errFiredBefore):
		return nil
	case errors.Is(err, store.ErrNotFound) && f.Start == nil:
		// The definition is gone (nothing was written): the fire
		// starts nothing, and the schedule must not stay stuck on it.
		f.NewBufferedFireAt = nil
		return e.missFires(ctx, f, 1, fmt.Sprintf("definition %q not found", s.Definition))
	case err != nil:
		return err
	}
	if e.m != nil {
		e.m.ScheduleFires.WithLabelValues(s.Name).Inc()
	}
	e.log.Info("schedule fired", "schedule", s.Name, "fire_time", at, "instance", id)
	return nil
}

// GetSchedule returns the schedule name (store.ErrNotFound).
func (e *Engine) GetSchedule(ctx context.Context, name string) (*store.Schedule, error) {
	return store.GetSchedule(ctx, e.schedules(), name)
}

// ListSchedules returns every schedule by name.
func (e *Engine) ListSchedules(ctx context.Context) ([]*store.Schedule, error) {
	return e.schedules().ListSchedules(ctx, store.ListSchedulesParams{})
}

// DeleteSchedule deletes the schedule name; the instances it started stay.
func (e *Engine) DeleteSchedule(ctx context.Context, name string) error {
	return e.schedules().DeleteSchedule(ctx, name)
}

// SetSchedulePaused pauses or resumes the schedule name. A resumed schedule
// fires the fire times of its pause that are still within its catch-up
// window; older ones are misses.
func (e *Engine) SetSchedulePaused(ctx context.Context, name string, paused bool) (*store.Schedule, error) {
	return e.schedules().SetSchedulePaused(ctx, name, paused)
}
