package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/workflow"
)

const swTryKeys = `
document: {dsl: '1.0.0', namespace: test, name: sw-try-keys, version: '1.0.0'}
do:
  - attempt:
      try:
        - prepare:
            call: steady
        - charge:
            call: flaky
            with: {amount: 5}
      catch:
        errors:
          with:
            type: https://serverlessworkflow.io/spec/1.0.0/errors/runtime
        retry:
          delay: {milliseconds: 1}
          limit:
            attempt: {count: 3}
`

// The retries of one call by a try keep the idempotency key of its first
// attempt and count its attempts on (1, 2, 3), so that a handler can
// deduplicate across them; another call of the same try list keeps a key
// of its own, and the same instance started again under another id gets
// other keys.
func TestServerlessWorkflowRetryKeepsKeyAndCountsAttempts(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		type seen struct {
			key     string
			attempt int
		}
		var (
			mu    sync.Mutex
			calls = map[string][]seen{}
		)
		record := func(name string, task engine.Task) int {
			mu.Lock()
			defer mu.Unlock()
			calls[name] = append(calls[name], seen{task.IdempotencyKey, task.Attempt})
			return len(calls[name])
		}
		steady := func(_ context.Context, task engine.Task) (json.RawMessage, error) {
			record("steady", task)
			return json.RawMessage(`{}`), nil
		}
		flaky := func(_ context.Context, task engine.Task) (json.RawMessage, error) {
			if record("flaky", task) < 3 {
				return nil, errors.New("card declined, try again")
			}
			return json.RawMessage(`{"charged": 5}`), nil
		}
		n := swNode(t, b, map[string]engine.Handler{"steady": steady, "flaky": flaky}, swTryKeys)
		n.start("sw-try-keys", "k1", `{}`)
		done := n.waitStatus("k1", workflow.StatusCompleted, 20*time.Second)
		// The errors the retry handled are in the history, one per fault.
		var faults []string
		for _, c := range n.causes(done) {
			if strings.Contains(c, " faulted: ") {
				faults = append(faults, c)
			}
		}
		if len(faults) != 2 || !strings.HasPrefix(faults[0], "task /do/0/attempt/try/1/charge faulted: ") || !strings.HasSuffix(faults[0], "card declined, try again") {
			t.Errorf("causes of the faults %q, want the charge's two errors", faults)
		}

		mu.Lock()
		defer mu.Unlock()
		for _, name := range []string{"flaky", "steady"} {
			got := calls[name]
			if len(got) != 3 {
				t.Fatalf("%s ran %d times, want 3: %v", name, len(got), got)
			}
			var attempts []int
			for _, s := range got {
				attempts = append(attempts, s.attempt)
				if s.key != got[0].key {
					t.Errorf("%s: keys %v, want one key for the retries of one call", name, got)
				}
			}
			if !slices.Equal(attempts, []int{1, 2, 3}) {
				t.Errorf("%s: attempts %v, want 1, 2, 3", name, attempts)
			}
		}
		if calls["flaky"][0].key == calls["steady"][0].key || calls["flaky"][0].key == "" {
			t.Errorf("two calls share the key %q", calls["flaky"][0].key)
		}
	})
}
