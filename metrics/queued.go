package metrics

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// QueuedCounter counts QUEUED instances per definition; the store provides it.
type QueuedCounter func(ctx context.Context) (map[string]int64, error)

// RegisterQueuedGauge adds flowd_workflows_queued{definition}: the instances
// of each definition waiting QUEUED for a slot of its concurrency limit,
// read from count at every scrape (bounded by a short timeout, as
// flowd_workflows). A definition without queued instances has no series.
func (m *Metrics) RegisterQueuedGauge(count QueuedCounter, log *slog.Logger) {
	m.Registry.MustRegister(&queuedCollector{count: count, log: log,
		desc: prometheus.NewDesc("flowd_workflows_queued", "Workflow instances waiting QUEUED for a concurrency slot, by definition.", []string{"definition"}, nil)})
}

type queuedCollector struct {
	count QueuedCounter
	log   *slog.Logger
	desc  *prometheus.Desc
}

func (c *queuedCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *queuedCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	counts, err := c.count(ctx)
	if err != nil {
		if c.log != nil {
			c.log.Warn("counting queued workflows for metrics", "err", err)
		}
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	for def, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), def)
	}
}
