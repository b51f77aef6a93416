package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

// The ratio is the median of the pair ratios, pairing runs in their order,
// not the ratio of the medians: here the medians' ratio is 1, the pairs'
// ratios 0.5, 2 and 3.
func TestComparisonIsMedianOfPairRatios(t *testing.T) {
	in := strings.Join([]string{
		"flowd bench output that is not a run",
		`dbos {"ops_per_sec": 200, "p50_ms": 10}`,
		`flowd-workflow {"ops_per_sec": 100, "p50_ms": 10}`,
		`dbos {"ops_per_sec": 100, "p50_ms": 10}`,
		`flowd-workflow {"ops_per_sec": 200, "p50_ms": 20}`,
		`dbos {"ops_per_sec": 300, "p50_ms": 10}`,
		`flowd-workflow {"ops_per_sec": 900, "p50_ms": 30}`,
	}, "\n")
	rs, err := readRuns(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	writeComparisons(&out, rs)
	got := out.String()
	for _, want := range []string{
		"3-step workflows, 3 pairs",
		"workflows/s               200.000      200.000     2.00x   target ratio >= 1.5: met\n",
		"p50 ms                     10.000       20.000     2.00x   target ratio <= 1: NOT met\n",
		"p99 ms               (not measured)",
		"rows/workflow        (not measured)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, "backlog drain") || strings.Contains(got, "code workflows") {
		t.Errorf("a comparison without runs was printed:\n%s", got)
	}
}

// The code comparison pairs its own DBOS runs with flowd's code runs: the
// step workflows' runs are not mixed in, and it has no targets.
func TestCodeComparisonPairsItsOwnRuns(t *testing.T) {
	in := strings.Join([]string{
		`dbos {"ops_per_sec": 1000}`,
		`flowd-workflow {"ops_per_sec": 1500}`,
		`dbos-code {"ops_per_sec": 100, "wal_bytes_per_item": 4000}`,
		`flowd-code {"ops_per_sec": 150, "wal_bytes_per_item": 2000}`,
		`dbos-code {"ops_per_sec": 200, "wal_bytes_per_item": 4000}`,
		`flowd-code {"ops_per_sec": 200, "wal_bytes_per_item": 2000}`,
	}, "\n")
	rs, err := readRuns(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	writeComparisons(&out, rs)
	got := out.String()
	for _, want := range []string{
		"3-step workflows, 1 pairs",
		"3-step code workflows, 2 pairs: median dbos-code, median flowd, median of the pair ratios flowd/dbos-code\n",
		"workflows/s               150.000      175.000     1.25x\n",
		"WAL bytes/workflow       4000.000     2000.000     0.50x\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
}

// Unpaired runs (a run that failed leaves its side one short) are left out.
func TestComparisonPairsOnlyWhatBothSidesRan(t *testing.T) {
	in := "river {\"ops_per_sec\": 100}\nflowd-queue {\"ops_per_sec\": 300}\nriver {\"ops_per_sec\": 1}\n"
	rs, err := readRuns(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	writeComparisons(&out, rs)
	if !strings.Contains(out.String(), "backlog drain, 1 pairs") || !strings.Contains(out.String(), "3.00x") {
		t.Errorf("got:\n%s", out.String())
	}
}

// Targets on flowd's own numbers look at flowd's median, not the ratio.
func TestGoalOnFlowdsMedian(t *testing.T) {
	in := `dbos {"rows_per_item": 5, "wal_bytes_per_item": 1000}
flowd-workflow {"rows_per_item": 11, "wal_bytes_per_item": 6144}
`
	rs, err := readRuns(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	writeComparisons(&out, rs)
	for _, want := range []string{"target flowd <= 10 rows: NOT met", "target flowd <= 6144 bytes: met"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("missing %q in:\n%s", want, out.String())
		}
	}
}

func TestReadRunsRejectsBrokenJSON(t *testing.T) {
	_, err := readRuns(strings.NewReader(`dbos {"ops_per_sec": `))
	if err == nil || !strings.Contains(err.Error(), `a "dbos" line is not JSON`) {
		t.Errorf("err = %v, want the line's prefix named", err)
	}
}
