package metrics

import "github.com/prometheus/client_golang/prometheus"

// FlowControl counts what step concurrency keys and rate limits hold back.
// Neither has a key label: keys are rendered from workflow inputs, and a
// label per key would grow without bound.
type FlowControl struct {
	// RateLimitWaits counts the waits rate limits impose: each task a
	// claim found with no token in its bucket, and each bucket a claim
	// emptied (the key's next tasks wait for the next token).
	RateLimitWaits prometheus.Counter
	// ConcurrencyWaits counts the tasks a claim found due but left queued
	// because their concurrency key had its limit of leased tasks.
	ConcurrencyWaits prometheus.Counter
}

func newFlowControl(reg *prometheus.Registry) FlowControl {
	f := FlowControl{
		RateLimitWaits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flowd_rate_limit_waits_total",
			Help: "Deliveries held back by a step's rate_limit: tasks a claim found without a token, and buckets a claim emptied.",
		}),
		ConcurrencyWaits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flowd_concurrency_key_waits_total",
			Help: "Tasks a claim left queued because their step concurrency key had its limit of leased tasks.",
		}),
	}
	reg.MustRegister(f.RateLimitWaits, f.ConcurrencyWaits)
	return f
}
