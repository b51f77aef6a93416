package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
)

// A comparison pairs the runs of a peer with flowd's, the i-th of one with
// the i-th of the other (scripts/bench-peers alternates them), and reports
// per metric the median of each side and the median of the pair ratios
// flowd / peer, and whether flowd meets its target where it has one.
type comparison struct {
	title       string
	peer, flowd string // line prefixes
	metrics     []metric
}

type metric struct {
	label, field string
	goal         *goal // nil: reported only
}

// goal is a target a metric is held to: on the pair ratio or on flowd's
// own median.
type goal struct {
	text string
	met  func(flowd, ratio float64) bool
}

func ratioAtLeast(x float64) *goal {
	return &goal{fmt.Sprintf("target ratio >= %g", x), func(_, r float64) bool { return r >= x }}
}

func ratioAtMost(x float64) *goal {
	return &goal{fmt.Sprintf("target ratio <= %g", x), func(_, r float64) bool { return r <= x }}
}

func flowdAtMost(x float64, unit string) *goal {
	return &goal{fmt.Sprintf("target flowd <= %g %s", x, unit), func(f, _ float64) bool { return f <= x }}
}

var comparisons = []comparison{
	{
		title: "3-step workflows", peer: "dbos", flowd: "flowd-workflow",
		metrics: []metric{
			{"workflows/s", "ops_per_sec", ratioAtLeast(1.5)},
			{"p50 ms", "p50_ms", ratioAtMost(1)},
			{"p99 ms", "p99_ms", nil},
			{"rows/workflow", "rows_per_item", flowdAtMost(10, "rows")},
			{"WAL bytes/workflow", "wal_bytes_per_item", flowdAtMost(6*1024, "bytes")},
		},
	},
	{
		// The same DBOS workflow against flowd's code workflow of three
		// worker.Step calls run in process (flowd bench --scenario code):
		// like for like, a function whose steps are checkpointed. The
		// targets above are the step workflows'; this one is reported.
		title: "3-step code workflows", peer: "dbos-code", flowd: "flowd-code",
		metrics: []metric{
			{"workflows/s", "ops_per_sec", nil},
			{"p50 ms", "p50_ms", nil},
			{"p99 ms", "p99_ms", nil},
			{"rows/workflow", "rows_per_item", nil},
			{"WAL bytes/workflow", "wal_bytes_per_item", nil},
		},
	},
	{
		title: "backlog drain", peer: "river", flowd: "flowd-queue",
		metrics: []metric{
			{"steps/s", "ops_per_sec", ratioAtLeast(0.5)},
			{"rows/step", "rows_per_item", nil},
			{"WAL bytes/step", "wal_bytes_per_item", nil},
		},
	},
}

// runs is every run's numeric fields, by line prefix, in input order.
type runs map[string][]map[string]float64

// readRuns reads lines "PREFIX {json}"; other lines are ignored.
func readRuns(r io.Reader) (runs, error) {
	out := runs{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		prefix, body, ok := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		if !ok || !strings.HasPrefix(strings.TrimSpace(body), "{") {
			continue
		}
		var fields map[string]any
		if err := json.Unmarshal([]byte(body), &fields); err != nil {
			return nil, fmt.Errorf("a %q line is not JSON: %w", prefix, err)
		}
		nums := map[string]float64{}
		for k, v := range fields {
			if f, ok := v.(float64); ok {
				nums[k] = f
			}
		}
		out[prefix] = append(out[prefix], nums)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the runs: %w", err)
	}
	return out, nil
}

// writeComparisons prints, for each comparison with runs on both sides,
// one line per metric: both sides' medians and the median pair ratio.
func writeComparisons(w io.Writer, rs runs) {
	for _, c := range comparisons {
		pairs := min(len(rs[c.peer]), len(rs[c.flowd]))
		if pairs == 0 {
			continue
		}
		fmt.Fprintf(w, "%s, %d pairs: median %s, median flowd, median of the pair ratios flowd/%s\n", c.title, pairs, c.peer, c.peer)
		for _, m := range c.metrics {
			var peer, flowd, ratios []float64
			for i := range pairs {
				p, okP := rs[c.peer][i][m.field]
				f, okF := rs[c.flowd][i][m.field]
				if !okP || !okF {
					continue
				}
				peer, flowd = append(peer, p), append(flowd, f)
				if p != 0 {
					ratios = append(ratios, f/p)
				}
			}
			if len(ratios) == 0 {
				fmt.Fprintf(w, "  %-20s (not measured)\n", m.label)
				continue
			}
			fl, r := median(flowd), median(ratios)
			fmt.Fprintf(w, "  %-20s %12.3f %12.3f %8.2fx", m.label, median(peer), fl, r)
			if m.goal != nil {
				verdict := "met"
				if !m.goal.met(fl, r) {
					verdict = "NOT met"
				}
				fmt.Fprintf(w, "   %s: %s", m.goal.text, verdict)
			}
			fmt.Fprintln(w)
		}
	}
}

// median of xs (the mean of the middle two when their count is even).
func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
