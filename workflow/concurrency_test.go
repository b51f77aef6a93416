package workflow

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestParseConcurrencyProblems(t *testing.T) {
	t.Parallel()
	const steps = "\nsteps:\n  - {id: a, type: task, handler: h}"
	cases := []struct {
		name string
		doc  string
		want []string
	}{
		{"no limit", "name: x\nconcurrency: {key: k}" + steps,
			[]string{`concurrency.limit: must be at least 1, not 0`}},
		{"negative limit", "name: x\nconcurrency: {limit: -2}" + steps,
			[]string{`concurrency.limit: must be at least 1, not -2`}},
		{"unknown strategy", "name: x\nconcurrency: {limit: 1, strategy: cancel_oldest}" + steps,
			[]string{`concurrency.strategy: unknown strategy "cancel_oldest" (want one of queue, cancel_newest, cancel_in_progress)`}},
		{"key references a step", "name: x\nconcurrency: {limit: 1, key: '{{ .steps.a.output }}'}" + steps,
			[]string{`concurrency.key: invalid reference "{{ .steps.a.output }}": unknown step "a"`}},
		{"key with a bad root", "name: x\nconcurrency: {limit: 1, key: '{{ .nope }}'}" + steps,
			[]string{`concurrency.key: invalid reference "{{ .nope }}": unknown root ".nope" (want .input or .steps.STEP.output)`}},
		{"limit not a number", "name: x\nconcurrency: {limit: many}" + steps,
			[]string{`concurrency.limit: must be an integer, not a string`}},
		{"unknown field", "name: x\nconcurrency: {limit: 1, max: 2}" + steps,
			[]string{`concurrency: unknown field "max" (known: key, limit, strategy)`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := problemsOf(t, tc.doc); !slices.Equal(got, tc.want) {
				t.Errorf("problems:\n  got  %q\n  want %q", got, tc.want)
			}
		})
	}
}

func TestParseConcurrency(t *testing.T) {
	t.Parallel()
	d, err := ParseDefinition([]byte("name: x\nconcurrency: {key: 'tenant-{{ .input.tenant }}', limit: 2, strategy: cancel_in_progress}\nsteps:\n  - {id: a, type: task, handler: h}"))
	if err != nil {
		t.Fatal(err)
	}
	c := d.Concurrency
	if c == nil || c.Limit != 2 || c.StrategyOrDefault() != ConcurrencyCancelInProgress {
		t.Fatalf("concurrency = %+v", c)
	}
	key, err := c.RenderKey(json.RawMessage(`{"tenant": "acme"}`), 0)
	if err != nil || key != "tenant-acme" {
		t.Errorf("RenderKey = %q, %v; want tenant-acme", key, err)
	}
	if _, err := c.RenderKey(json.RawMessage(`{}`), 0); err == nil {
		t.Error("RenderKey with the referenced input missing: no error")
	}
	def := &Concurrency{Limit: 1}
	if k, err := def.RenderKey(json.RawMessage(`{}`), 0); err != nil || k != "" || def.StrategyOrDefault() != ConcurrencyQueue {
		t.Errorf("default key and strategy: %q, %v, %s", k, err, def.StrategyOrDefault())
	}
}

func TestQueuedTransitions(t *testing.T) {
	t.Parallel()
	for _, to := range Statuses {
		want := to == StatusRunning || to == StatusCancelled
		if got := CanTransition(StatusQueued, to); got != want {
			t.Errorf("QUEUED → %s allowed = %v, want %v", to, got, want)
		}
		if CanTransition(to, StatusQueued) {
			t.Errorf("%s → QUEUED is allowed: an instance is created QUEUED, it never returns there", to)
		}
	}
	if StatusQueued.HoldsSlot() || !StatusRunning.HoldsSlot() || !StatusPaused.HoldsSlot() || StatusFailed.HoldsSlot() {
		t.Error("only RUNNING and PAUSED hold a slot")
	}
}
