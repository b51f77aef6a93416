package metrics

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// ScheduleMetrics count what the schedulers of this node did, per schedule.
type ScheduleMetrics struct {
	// ScheduleFires counts the instances a fire time started (the
	// scheduler's fires, buffered ones included; not triggers or
	// backfills, which a client asked for).
	ScheduleFires *prometheus.CounterVec // schedule
	// ScheduleMisses counts the fire times that started nothing: older
	// than the catch-up window when found due, skipped by overlap skip, or
	// beyond the one fire overlap buffer_one keeps waiting.
	ScheduleMisses *prometheus.CounterVec // schedule
}

func (m *Metrics) registerSchedules() {
	m.ScheduleFires = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flowd_schedule_fires_total",
		Help: "Instances started by the fire times of a schedule, counted by the node that fired them.",
	}, []string{"schedule"})
	m.ScheduleMisses = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flowd_schedule_misses_total",
		Help: "Fire times of a schedule that started nothing: past the catch-up window, or skipped by its overlap policy.",
	}, []string{"schedule"})
	m.Registry.MustRegister(m.ScheduleFires, m.ScheduleMisses)
}

// The schedule store's writes pass through; a fire that created its
// instance counts as a create of flowd_state_updates_total.

func (s *instrumentedStore) PutSchedule(ctx context.Context, sc store.Schedule) (*store.Schedule, bool, error) {
	return s.base.PutSchedule(ctx, sc)
}
func (s *instrumentedStore) ListSchedules(ctx context.Context, p store.ListSchedulesParams) ([]*store.Schedule, error) {
	return s.base.ListSchedules(ctx, p)
}
func (s *instrumentedStore) DeleteSchedule(ctx context.Context, name string) error {
	return s.base.DeleteSchedule(ctx, name)
}
func (s *instrumentedStore) SetSchedulePaused(ctx context.Context, name string, paused bool) (*store.Schedule, error) {
	return s.base.SetSchedulePaused(ctx, name, paused)
}
func (s *instrumentedStore) FireSchedule(ctx context.Context, f store.ScheduleFire) (*workflow.Instance, error) {
	inst, err := s.base.FireSchedule(ctx, f)
	s.noteWrite(err, inst != nil)
	if f.Start != nil && (err != nil || inst != nil) {
		s.m.StateUpdates.WithLabelValues("create", Result(err)).Inc()
	}
	return inst, err
}
