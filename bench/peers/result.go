package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"time"
)

// Result is one run's measurements, under the field names `flowd bench`
// prints, so that one reader compares both.
type Result struct {
	Scenario  string  `json:"scenario"`
	Clients   int     `json:"clients,omitempty"`
	DurationS float64 `json:"duration_s"` // measured: first op started → last op ended
	Ops       int64   `json:"ops"`        // workflows (dbos) or jobs (river) done and checked
	OpsPerSec float64 `json:"ops_per_sec"`
	P50MS     float64 `json:"p50_ms"`
	P90MS     float64 `json:"p90_ms"`
	P99MS     float64 `json:"p99_ms"`
	MaxMS     float64 `json:"max_ms"`
	// Errors counts failed calls and every item whose check failed: a
	// wrong result, a job not completed exactly once, a row count off.
	Errors int64 `json:"errors"`

	Workers     int     `json:"workers,omitempty"`
	Backlog     int     `json:"backlog,omitempty"`
	StepsPerSec float64 `json:"steps_per_sec,omitempty"`

	// The measured part's time per item, the WAL the cluster wrote in it
	// (pg_current_wal_lsn before and after: cluster-wide), and the table
	// rows the database had written (inserted, updated, deleted) from
	// before the harness connected to after all its sessions had closed,
	// per item.
	MSPerItem       float64 `json:"ms_per_item,omitempty"`
	WALBytes        int64   `json:"wal_bytes,omitempty"`
	WALBytesPerItem float64 `json:"wal_bytes_per_item,omitempty"`
	Rows            int64   `json:"rows,omitempty"`
	RowsPerItem     float64 `json:"rows_per_item,omitempty"`
}

// setTiming fills in the throughput and latency fields from the measured
// part's length and the latencies of the items done in it.
func (r *Result) setTiming(elapsed time.Duration, lat []time.Duration) {
	r.DurationS = round3(elapsed.Seconds())
	if elapsed > 0 {
		r.OpsPerSec = round3(float64(r.Ops) / elapsed.Seconds())
	}
	if r.Ops > 0 {
		r.MSPerItem = round3(float64(elapsed) / float64(time.Millisecond) / float64(r.Ops))
	}
	sorted := slices.Sorted(slices.Values(lat))
	r.P50MS = ms(percentile(sorted, 0.50))
	r.P90MS = ms(percentile(sorted, 0.90))
	r.P99MS = ms(percentile(sorted, 0.99))
	if len(sorted) > 0 {
		r.MaxMS = ms(sorted[len(sorted)-1])
	}
}

// setWritten fills in the WAL and row counts, divided by items.
func (r *Result) setWritten(walBytes, rows int64, items int64) {
	r.WALBytes, r.Rows = walBytes, rows
	if items > 0 {
		r.WALBytesPerItem = round3(float64(walBytes) / float64(items))
		r.RowsPerItem = round3(float64(rows) / float64(items))
	}
}

// print writes r as one JSON line.
func (r *Result) print(w io.Writer) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encoding the result: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// percentile is the nearest-rank percentile of sorted (0 when empty), as
// flowd bench computes it.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(float64(len(sorted))*p)) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return round3(float64(d) / float64(time.Millisecond)) }

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }
