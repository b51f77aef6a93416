// Flow control of tasks: a definition's priority, a step's concurrency
// key and its rate limit, and what each task carries of them.

package workflow

import (
	"fmt"
	"math"
)

// Priorities: a definition's (and a start's) priority is 1–5, higher
// claimed first; DefaultPriority when none is given.
const (
	MinPriority     = 1
	MaxPriority     = 5
	DefaultPriority = 3
)

// MaxFlowKeyLength bounds a rendered concurrency or rate-limit key.
const MaxFlowKeyLength = 256

// MaxRatePerSecond bounds a rate limit's per_second, and MaxRateBurst its
// burst: beyond them a limit limits nothing a claim could notice.
const (
	MaxRatePerSecond = 1e6
	MaxRateBurst     = 1_000_000
)

// StepConcurrency bounds the tasks leased at once with the same rendered
// Key, whichever definition and instance they belong to: at most Limit.
type StepConcurrency struct {
	Key   string `json:"key"`
	Limit int    `json:"limit"`
}

// RateLimit is a token bucket shared by the tasks with the same rendered
// Key ("" is a key too): PerSecond tokens a second, at most Burst (nil:
// PerSecond rounded up, at least 1) kept; a delivery takes one.
type RateLimit struct {
	Key       string  `json:"key,omitempty"`
	PerSecond float64 `json:"per_second"`
	Burst     *int    `json:"burst,omitempty"`
}

// BurstOrDefault is the bucket's size: Burst, or PerSecond rounded up and
// at least 1.
func (r *RateLimit) BurstOrDefault() int {
	if r.Burst != nil {
		return *r.Burst
	}
	return max(1, int(math.Ceil(r.PerSecond)))
}

// PriorityProblem says what is wrong with a priority ("" when it is 1–5).
func PriorityProblem(p int) string {
	if p < MinPriority || p > MaxPriority {
		return fmt.Sprintf("must be %d–%d, not %d", MinPriority, MaxPriority, p)
	}
	return ""
}

// PriorityOrDefault is the definition's priority, DefaultPriority when it
// has none.
func (d *Definition) PriorityOrDefault() int {
	if d.Priority == nil {
		return DefaultPriority
	}
	return *d.Priority
}

// TaskFlow is the flow control a task is claimed under, fixed when the
// task is created: its priority, its concurrency key (ConcurrencyKey ""
// with ConcurrencyLimit 0: none) and its rate limit (RatePerSecond 0:
// none).
type TaskFlow struct {
	Priority         int
	ConcurrencyKey   string
	ConcurrencyLimit int
	RateKey          string
	RatePerSecond    float64
	RateBurst        int
}

// Limited reports whether the task's claim is held back by a key.
func (f TaskFlow) Limited() bool { return f.ConcurrencyLimit > 0 || f.RatePerSecond > 0 }

func validatePriority(ps *problemList, p *int) {
	if p != nil {
		if msg := PriorityProblem(*p); msg != "" {
			ps.add("priority", msg)
		}
	}
}

// validateStepFlowControl checks a step's concurrency and rate_limit: only
// task and http steps (the steps whose tasks workers or the engine's http
// client claim), a key and a limit of at least 1, a positive rate and a
// burst of at least 1.
func validateStepFlowControl(ps *problemList, path string, s *Step) {
	claimed := s.Type == StepTypeTask || s.Type == StepTypeHTTP || !s.Type.Valid()
	if c := s.Concurrency; c != nil {
		p := path + ".concurrency"
		if !claimed {
			ps.add(p, "only task and http steps have a concurrency key")
		}
		if c.Key == "" {
			ps.add(p+".key", "is required")
		}
		if c.Limit < 1 {
			ps.add(p+".limit", fmt.Sprintf("must be at least 1, not %d", c.Limit))
		}
	}
	if r := s.RateLimit; r != nil {
		p := path + ".rate_limit"
		if !claimed {
			ps.add(p, "only task and http steps have a rate limit")
		}
		if !(r.PerSecond > 0) || r.PerSecond > MaxRatePerSecond {
			ps.add(p+".per_second", fmt.Sprintf("must be more than 0 and at most %g, not %g", float64(MaxRatePerSecond), r.PerSecond))
		}
		if r.Burst != nil && (*r.Burst < 1 || *r.Burst > MaxRateBurst) {
			ps.add(p+".burst", fmt.Sprintf("must be 1–%d, not %d", MaxRateBurst, *r.Burst))
		}
	}
}

// flowKey is a key template of a step with its path.
type flowKey struct {
	path     string
	template *string
}

// flowControlKeys lists the step's key templates, for validateTemplates.
func flowControlKeys(s *Step) []flowKey {
	var keys []flowKey
	if s.Concurrency != nil && s.Concurrency.Key != "" {
		keys = append(keys, flowKey{".concurrency.key", &s.Concurrency.Key})
	}
	if s.RateLimit != nil && s.RateLimit.Key != "" {
		keys = append(keys, flowKey{".rate_limit.key", &s.RateLimit.Key})
	}
	return keys
}
