package metrics

import "github.com/prometheus/client_golang/prometheus"

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
