package workflow

import (
	"slices"
	"testing"
)

func TestParseFlowControlProblems(t *testing.T) {
	t.Parallel()
	const task = "name: x\nsteps:\n  - {id: a, type: task, handler: h, "
	cases := []struct {
		name string
		doc  string
		want []string
	}{
		{"priority too low", "name: x\npriority: 0\nsteps:\n  - {id: a, type: task, handler: h}",
			[]string{`priority: must be 1–5, not 0`}},
		{"priority too high", "name: x\npriority: 6\nsteps:\n  - {id: a, type: task, handler: h}",
			[]string{`priority: must be 1–5, not 6`}},
		{"priority not a number", "name: x\npriority: high\nsteps:\n  - {id: a, type: task, handler: h}",
			[]string{`priority: must be an integer, not a string`}},
		{"concurrency without key", task + "concurrency: {limit: 2}}",
			[]string{`steps[0] (a): concurrency.key: is required`}},
		{"concurrency limit 0", task + "concurrency: {key: k, limit: 0}}",
			[]string{`steps[0] (a): concurrency.limit: must be at least 1, not 0`}},
		{"concurrency limit missing", task + "concurrency: {key: k}}",
			[]string{`steps[0] (a): concurrency.limit: must be at least 1, not 0`}},
		{"concurrency unknown field", task + "concurrency: {key: k, limit: 1, strategy: queue}}",
			[]string{`steps[0] (a): concurrency: unknown field "strategy" (known: key, limit)`}},
		{"concurrency on a sleep step", "name: x\nsteps:\n  - {id: a, type: sleep, duration: 1s, concurrency: {key: k, limit: 1}}",
			[]string{`steps[0] (a): concurrency: only task and http steps have a concurrency key`}},
		{"concurrency key template", task + "concurrency: {key: '{{ .nope }}', limit: 1}}",
			[]string{`steps[0] (a): concurrency.key: invalid reference "{{ .nope }}": unknown root ".nope" (want .input or .steps.STEP.output)`}},
		{"concurrency key item without foreach", task + "concurrency: {key: '{{ .item }}', limit: 1}}",
			[]string{`steps[0] (a): concurrency.key: invalid reference "{{ .item }}": .item and .index are only defined in a step with foreach`}},
		{"rate without per_second", task + "rate_limit: {key: k}}",
			[]string{`steps[0] (a): rate_limit.per_second: must be more than 0 and at most 1e+06, not 0`}},
		{"rate negative", task + "rate_limit: {per_second: -1}}",
			[]string{`steps[0] (a): rate_limit.per_second: must be more than 0 and at most 1e+06, not -1`}},
		{"burst 0", task + "rate_limit: {per_second: 2, burst: 0}}",
			[]string{`steps[0] (a): rate_limit.burst: must be 1–1000000, not 0`}},
		{"rate on a wait step", "name: x\nsteps:\n  - {id: a, type: wait, rate_limit: {per_second: 1}}",
			[]string{`steps[0] (a): rate_limit: only task and http steps have a rate limit`}},
		{"rate key template", task + "rate_limit: {key: '{{ .input.a }', per_second: 1}}",
			nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := problemsOf(t, tc.doc)
			if tc.want == nil {
				if len(got) != 1 || !hasPrefix(got[0], "steps[0] (a): rate_limit.key: ") {
					t.Errorf("problems: got %q, want one about rate_limit.key", got)
				}
				return
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("problems:\n  got  %q\n  want %q", got, tc.want)
			}
		})
	}
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }

func TestParseFlowControl(t *testing.T) {
	t.Parallel()
	d, err := ParseDefinition([]byte(`name: x
priority: 5
steps:
  - id: a
    type: task
    handler: h
    foreach: .input.items
    concurrency: {key: 'tenant-{{ .item.tenant }}', limit: 2}
    rate_limit: {per_second: 2.5}
  - id: b
    type: http
    request: {method: GET, url: 'http://x'}
    rate_limit: {key: api, per_second: 0.5, burst: 3}
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := d.PriorityOrDefault(); got != 5 {
		t.Errorf("priority %d, want 5", got)
	}
	a, b := d.Steps[0], d.Steps[1]
	if a.Concurrency == nil || a.Concurrency.Key != "tenant-{{ .item.tenant }}" || a.Concurrency.Limit != 2 {
		t.Errorf("concurrency %+v", a.Concurrency)
	}
	if got := a.RateLimit.BurstOrDefault(); got != 3 {
		t.Errorf("default burst of 2.5/s: %d, want 3 (rounded up)", got)
	}
	if got := b.RateLimit.BurstOrDefault(); got != 3 {
		t.Errorf("burst %d, want 3", got)
	}
	if got := (&RateLimit{PerSecond: 0.2}).BurstOrDefault(); got != 1 {
		t.Errorf("default burst of 0.2/s: %d, want 1", got)
	}
	if got := (&Definition{}).PriorityOrDefault(); got != DefaultPriority {
		t.Errorf("default priority %d", got)
	}
}
