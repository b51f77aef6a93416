package bench_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/flowd/flowd/bench"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// --concurrency-limit puts a concurrency limit on the workflow scenario's
// definition and spreads the starts over keys: every workflow still
// completes, each with its key in its input.
func TestWorkflowScenarioConcurrencyLimit(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			st := open(t, b.newDB(t))
			cfg := short(st, bench.ScenarioWorkflow, &syncBuffer{})
			cfg.MaxInFlight, cfg.Duration, cfg.ConcurrencyLimit = 4, time.Second, 1
			res := run(t, cfg)
			if res.ConcurrencyLimit != 1 || res.Started < 2 || res.Completed != res.Started || res.LostUpdates != 0 {
				t.Fatalf("concurrency-limited workflow run: limit %d, started %d, completed %d, lost %d", res.ConcurrencyLimit, res.Started, res.Completed, res.LostUpdates)
			}
			rec, err := store.GetDefinition(t.Context(), st, "flowd-bench-chain", 0)
			if err != nil {
				t.Fatal(err)
			}
			var def workflow.Definition
			if err := json.Unmarshal(rec.Spec, &def); err != nil {
				t.Fatal(err)
			}
			if def.Concurrency == nil || def.Concurrency.Limit != 1 || def.Concurrency.Key == "" {
				t.Errorf("the bench definition's concurrency: %+v", def.Concurrency)
			}
			for n := range 2 {
				inst, err := st.Get(t.Context(), fmt.Sprintf("%sw%07d", res.IDPrefix, n))
				if err != nil {
					t.Fatal(err)
				}
				if want := fmt.Sprintf(`{"k":"%d"}`, n); !bytes.Equal(compact(t, inst.Input), []byte(want)) {
					t.Errorf("workflow %d's input %s, want %s (its key)", n, inst.Input, want)
				}
			}
			checkJSON(t, res)
		})
	}
}

func compact(t *testing.T, raw []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
