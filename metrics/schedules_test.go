package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
)

// TestScheduleCounters: the fire and miss counters are registered and
// exported per schedule.
func TestScheduleCounters(t *testing.T) {
	m := New()
	m.ScheduleFires.WithLabelValues("nightly").Add(2)
	m.ScheduleMisses.WithLabelValues("nightly").Inc()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for _, f := range families {
		if _, err := expfmt.MetricFamilyToText(&out, f); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{`flowd_schedule_fires_total{schedule="nightly"} 2`, `flowd_schedule_misses_total{schedule="nightly"} 1`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("scrape has no %s", want)
		}
	}
}
