// Package metrics owns flowd's Prometheus metrics on a private registry;
// package store/observed records every state update of the store in them.
package metrics

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// Metrics holds every flowd collector.
type Metrics struct {
	Registry         *prometheus.Registry
	StateUpdates     *prometheus.CounterVec   // op, result
	UpdateRetries    prometheus.Counter       //
	UpdateDuration   *prometheus.HistogramVec // op
	TasksClaimed     prometheus.Counter
	TasksCompleted   *prometheus.CounterVec // result
	LeaseExpirations prometheus.Counter
	// WorkflowsDeleted counts the instances deleted, by DeleteInstance
	// (DELETE /v1/workflows/{id}) and by the retention sweep alike:
	// store/observed counts every delete that was stored.
	WorkflowsDeleted prometheus.Counter
	// EventsPublished counts the events stored by POST /v1/events;
	// EventsDelivered the steps they completed (on publish or later);
	// EventsExpired the events the sweeper deleted after the retention.
	EventsPublished prometheus.Counter
	EventsDelivered prometheus.Counter
	EventsExpired   prometheus.Counter
	// Schedule fires and misses (schedules.go).
	ScheduleMetrics
	// FlowControl counts the waits of step concurrency keys and rate
	// limits.
	FlowControl FlowControl

	storage storageHealth // what flowd_storage_full and StorageFull report
}

// Results of flowd_state_updates_total.
const (
	ResultOK       = "ok"
	ResultConflict = "conflict"
	ResultNotFound = "not_found"
	ResultError    = "error"
)

// Results are the results of flowd_state_updates_total.
var Results = []string{ResultOK, ResultConflict, ResultNotFound, ResultError}

// Ops are the operations of flowd_state_updates_total and
// flowd_update_duration_seconds: the store's writes store/observed
// records.
var Ops = []string{"create", "apply", "delete"}

// TaskResults are the results of flowd_tasks_completed_total: an attempt
// completed its step, failed for good, failed and was queued again, was fenced
// off (stale lease, workflow no longer running), or hit an error.
var TaskResults = []string{"completed", "failed", "retried", "fenced", "error"}

// New returns the metrics registered on a fresh registry with the Go and
// process collectors.
func New() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		StateUpdates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowd_state_updates_total",
			Help: "Atomic instance writes by operation and result (ok, conflict, not_found, error).",
		}, []string{"op", "result"}),
		UpdateRetries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flowd_update_retries_total",
			Help: "Retries of versioned updates after a conflict.",
		}),
		UpdateDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "flowd_update_duration_seconds",
			Help:    "Duration of atomic instance writes by operation.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"op"}),
		TasksClaimed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flowd_tasks_claimed_total",
			Help: "Tasks claimed by workers under a lease.",
		}),
		TasksCompleted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowd_tasks_completed_total",
			Help: "Task attempts finished, by result.",
		}, []string{"result"}),
		LeaseExpirations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flowd_lease_expirations_total",
			Help: "Task leases that expired and were re-queued or failed.",
		}),
		WorkflowsDeleted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flowd_workflows_deleted_total",
			Help: "Finished workflow instances deleted with their history, tasks and idempotency key: by DELETE /v1/workflows/{id} and by the retention sweep (--retention, a definition's retention).",
		}),
		EventsPublished: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flowd_events_published_total",
			Help: "Events published with POST /v1/events (or flowd event).",
		}),
		EventsDelivered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flowd_events_delivered_total",
			Help: "Wait steps completed by an event, when it was published or when they started waiting.",
		}),
		EventsExpired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flowd_events_expired_total",
			Help: "Stored events deleted by the sweeper once older than --event-retention.",
		}),
	}
	m.FlowControl = newFlowControl(m.Registry)
	// Known labels exist from the start, so a scrape shows them at 0.
	for _, r := range TaskResults {
		m.TasksCompleted.WithLabelValues(r)
	}
	for _, op := range Ops {
		for _, r := range Results {
			m.StateUpdates.WithLabelValues(op, r)
		}
		m.UpdateDuration.WithLabelValues(op)
	}
	storageFull := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "flowd_storage_full",
		Help: "1 while the database is out of space: a write failed for lack of it and none has stored anything since.",
	}, func() float64 {
		if m.storage.full.Load() {
			return 1
		}
		return 0
	})
	m.Registry.MustRegister(
		storageFull,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.StateUpdates, m.UpdateRetries, m.UpdateDuration,
		m.TasksClaimed, m.TasksCompleted, m.LeaseExpirations, m.WorkflowsDeleted,
		m.EventsPublished, m.EventsDelivered, m.EventsExpired,
	)
	m.registerSchedules()
	return m
}

// RetryPolicy returns p with OnRetry counting into flowd_update_retries_total.
func (m *Metrics) RetryPolicy(p store.RetryPolicy) store.RetryPolicy {
	prev := p.OnRetry
	p.OnRetry = func(attempt int, err error) {
		m.UpdateRetries.Inc()
		if prev != nil {
			prev(attempt, err)
		}
	}
	return p
}

// Counter counts instances by status; the store provides it.
type Counter func(ctx context.Context) (map[workflow.Status]int64, error)

// RegisterWorkflowGauge adds flowd_workflows{status}, read from count at every
// scrape (bounded by a short timeout, so a slow database cannot hang /metrics).
func (m *Metrics) RegisterWorkflowGauge(count Counter, log *slog.Logger) {
	m.Registry.MustRegister(&workflowCollector{count: count, log: log,
		desc: prometheus.NewDesc("flowd_workflows", "Workflow instances by status.", []string{"status"}, nil)})
}

type workflowCollector struct {
	count Counter
	log   *slog.Logger
	desc  *prometheus.Desc
}

func (c *workflowCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *workflowCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	counts, err := c.count(ctx)
	if err != nil {
		if c.log != nil {
			c.log.Warn("counting workflows for metrics", "err", err)
		}
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	for _, st := range workflow.Statuses {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[st]), string(st))
	}
}

// Result classifies an operation's error for flowd_state_updates_total.
func Result(err error) string {
	switch {
	case err == nil:
		return ResultOK
	case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrStatusMismatch), errors.Is(err, store.ErrNotTerminal):
		return ResultConflict
	case errors.Is(err, store.ErrNotFound):
		return ResultNotFound
	}
	return ResultError
}
