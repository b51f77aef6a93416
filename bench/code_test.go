package bench_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/bench"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// The code scenario runs 3-step code workflows in process: every workflow
// started completes, counted once, with its three steps recorded and its
// input + 3 as its output, and no error, on both stores.
func TestCodeScenario(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			st := open(t, b.newDB(t))
			cfg := short(st, bench.ScenarioCode, &syncBuffer{})
			cfg.Workers, cfg.MaxInFlight, cfg.Duration = 4, 8, time.Second
			res := run(t, cfg)
			window := res.DurationS
			if res.Scenario != bench.ScenarioCode || res.Workers != 4 || res.Started < 2 || res.Completed != res.Started || res.Ops > res.Completed {
				t.Fatalf("scenario %q, workers %d, started %d, completed %d, ops %d; want code, 4, ≥ 2 started, all completed, ops ≤ completed",
					res.Scenario, res.Workers, res.Started, res.Completed, res.Ops)
			}
			if res.Ops > 0 && (res.StepsPerSec <= 0 || res.P50MS <= 0 || res.P99MS < res.P50MS || window <= 0) {
				t.Errorf("%d ops: steps/s %v, p50 %v ms, p99 %v ms in %vs", res.Ops, res.StepsPerSec, res.P50MS, res.P99MS, window)
			}
			// The data holds what the result counted: as many completed
			// code workflows under the run's prefix, each with its three
			// steps and its output.
			ids := listIDs(t, st, res.IDPrefix)
			if int64(len(ids)) != res.Started {
				t.Fatalf("%d workflows under %s, %d started", len(ids), res.IDPrefix, res.Started)
			}
			for _, id := range ids {
				inst, err := st.Get(t.Context(), id)
				if err != nil {
					t.Fatal(err)
				}
				n, _ := strconv.Atoi(string(inst.Input))
				if inst.Definition != "flowd-bench-code" || inst.Status != workflow.StatusCompleted || len(inst.State.Steps) != 3 || string(inst.Output) != strconv.Itoa(n+3) {
					t.Fatalf("%s: %s %s with %d steps, input %s, output %s; want a completed code workflow with 3 steps and output input+3",
						id, inst.Definition, inst.Status, len(inst.State.Steps), inst.Input, inst.Output)
				}
				for _, step := range []string{"a", "b", "c"} {
					if s := inst.State.Steps[step]; s == nil || s.Status != workflow.StepCompleted || !strings.Contains(string(s.Extra["kind"]), "step") {
						t.Fatalf("%s: step %s is %+v, want a COMPLETED step entry", id, step, s)
					}
				}
			}
		})
	}
}

// The code-growth scenario runs one code workflow of --steps checkpoints,
// checks every one recorded, and reports a checkpoint's cost: time and
// bytes per checkpoint, early and late, and the workflow's history, on
// both stores.
func TestCodeGrowthScenario(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			progress := &syncBuffer{}
			cfg := withGrowth(t, b.newDB(t), bench.ScenarioCodeGrowth, progress)
			cfg.Steps, cfg.Workers = 40, 2
			cfg.Duration = time.Hour // the run ends with its workflow
			res := run(t, cfg)
			if res.Ops != 1 || res.Steps != 40 || res.OutputSize != bench.CodeGrowthOutputSize {
				t.Fatalf("ops %d, steps %d, output_size %d; want 1, 40, %d", res.Ops, res.Steps, res.OutputSize, bench.CodeGrowthOutputSize)
			}
			// A version per checkpoint, the start's and the completion's;
			// the state holds the 40 outputs.
			if res.HistoryVersions != 42 || res.FinalStateBytes < 40*bench.CodeGrowthOutputSize || res.HistoryBytesPerVersion <= 0 {
				t.Errorf("history: %d versions, %v bytes per version, final state %d bytes; want 42, > 0, ≥ %d",
					res.HistoryVersions, res.HistoryBytesPerVersion, res.FinalStateBytes, 40*bench.CodeGrowthOutputSize)
			}
			if res.CheckpointMSFirst <= 0 || res.CheckpointMSLast <= 0 || res.DurationS >= 3600 {
				t.Errorf("checkpoint ms first tenth %v, last tenth %v, in %vs; want > 0, before the duration", res.CheckpointMSFirst, res.CheckpointMSLast, res.DurationS)
			}
			checkGrowth(t, b.name, res, 40)
			if !strings.Contains(progress.String(), "code-growth: 40 steps; a checkpoint took") {
				t.Errorf("no summary line in:\n%s", progress)
			}
		})
	}
}

// listIDs is the ids of the instances of s whose id starts with prefix.
func listIDs(t *testing.T, s store.Backend, prefix string) []string {
	t.Helper()
	var ids []string
	p := store.ListParams{IDPrefix: prefix, Limit: 1000}
	for {
		page, err := s.List(t.Context(), p)
		if err != nil {
			t.Fatal(err)
		}
		for _, inst := range page.Instances {
			ids = append(ids, inst.ID)
		}
		if page.NextCursor == "" {
			return ids
		}
		p.Cursor = page.NextCursor
	}
}
