package main

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

func TestPercentileIsNearestRank(t *testing.T) {
	var lat []time.Duration
	for i := 1; i <= 100; i++ {
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{0.50, 50 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {1, 100 * time.Millisecond}, {0, time.Millisecond}} {
		if got := percentile(lat, c.p); got != c.want {
			t.Errorf("percentile(1..100 ms, %v) = %v, want %v", c.p, got, c.want)
		}
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("percentile(nil) = %v, want 0", got)
	}
}

func TestSetTimingSortsAndDivides(t *testing.T) {
	r := &Result{Ops: 4}
	r.setTiming(2*time.Second, []time.Duration{40 * time.Millisecond, 10 * time.Millisecond, 30 * time.Millisecond, 20 * time.Millisecond})
	if r.OpsPerSec != 2 || r.MSPerItem != 500 || r.P50MS != 20 || r.P99MS != 40 || r.MaxMS != 40 || r.DurationS != 2 {
		t.Errorf("setTiming: %+v", r)
	}
}

func TestSetWrittenPerItem(t *testing.T) {
	r := &Result{}
	r.setWritten(3000, 7, 2)
	if r.WALBytes != 3000 || r.WALBytesPerItem != 1500 || r.Rows != 7 || r.RowsPerItem != 3.5 {
		t.Errorf("setWritten(3000, 7, 2): %+v", r)
	}
	r = &Result{}
	r.setWritten(3000, 7, 0)
	if r.WALBytesPerItem != 0 || r.RowsPerItem != 0 {
		t.Errorf("setWritten with no items divided anyway: %+v", r)
	}
}

// The fields a reader of flowd bench's line looks for carry its names.
func TestResultUsesFlowdBenchFieldNames(t *testing.T) {
	r := &Result{Scenario: "dbos-workflow", Ops: 3, OpsPerSec: 1.5, P50MS: 2, P99MS: 4, WALBytes: 10, WALBytesPerItem: 3.333, Rows: 21, RowsPerItem: 7}
	var buf bytes.Buffer
	if err := r.print(&buf); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("not one JSON line: %q: %v", buf.String(), err)
	}
	for _, f := range []string{"ops", "ops_per_sec", "p50_ms", "p99_ms", "errors", "wal_bytes", "wal_bytes_per_item", "rows_per_item"} {
		if _, ok := got[f]; !ok {
			t.Errorf("field %q missing from %s", f, buf.String())
		}
	}
	if bytes.Count(buf.Bytes(), []byte("\n")) != 1 {
		t.Errorf("want exactly one line, got %q", buf.String())
	}
}
