package workflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Concurrency bounds the instances of a definition that hold a slot
// (RUNNING or PAUSED, Status.HoldsSlot) at once: at most Limit per rendered
// Key, across every node.
type Concurrency struct {
	// Key is a string template rendered from the start's input (only
	// .input may be referenced: no step has run yet); "" is one key for
	// every instance.
	Key   string `json:"key,omitempty"`
	Limit int    `json:"limit"`
	// Strategy says what a start over the limit does (default queue).
	Strategy ConcurrencyStrategy `json:"strategy,omitempty"`
}

// ConcurrencyStrategy is what a start does when its key has no free slot.
type ConcurrencyStrategy string

// The strategies.
const (
	// ConcurrencyQueue creates the instance QUEUED; queued instances
	// start oldest first as slots free.
	ConcurrencyQueue ConcurrencyStrategy = "queue"
	// ConcurrencyCancelNewest creates the instance CANCELLED.
	ConcurrencyCancelNewest ConcurrencyStrategy = "cancel_newest"
	// ConcurrencyCancelInProgress cancels the oldest RUNNING instance of
	// the key to make room, in the same transaction as the new one starts.
	ConcurrencyCancelInProgress ConcurrencyStrategy = "cancel_in_progress"
)

// ConcurrencyStrategies lists every strategy.
var ConcurrencyStrategies = []ConcurrencyStrategy{ConcurrencyQueue, ConcurrencyCancelNewest, ConcurrencyCancelInProgress}

// ConcurrencyLimitCause is the history cause of an instance a strategy
// cancelled because its key had no free slot.
const ConcurrencyLimitCause = "concurrency limit"

// StrategyOrDefault is c's strategy, ConcurrencyQueue when none is given.
func (c *Concurrency) StrategyOrDefault() ConcurrencyStrategy {
	if c.Strategy == "" {
		return ConcurrencyQueue
	}
	return c.Strategy
}

// RenderKey renders the key template with the start's input, at most max
// bytes (see Template.Render).
func (c *Concurrency) RenderKey(input json.RawMessage, max int) (string, error) {
	if c.Key == "" {
		return "", nil
	}
	t, err := CompileStringTemplate(c.Key, noSteps)
	if err != nil {
		return "", fmt.Errorf("concurrency key: %w", err)
	}
	key, err := t.RenderString(input, nil, max)
	if err != nil {
		return "", fmt.Errorf("concurrency key: %w", err)
	}
	return key, nil
}

// noSteps is the step look-up of the key template: it knows no step, so a
// reference to one is a problem.
func noSteps(string) bool { return false }

// validateConcurrency checks the concurrency block: a limit of at least
// 1, a known strategy and a key template that references the input only.
func (d *Definition) validateConcurrency(ps *problemList) {
	c := d.Concurrency
	if c == nil {
		return
	}
	if c.Limit < 1 {
		ps.add("concurrency.limit", fmt.Sprintf("must be at least 1, not %d", c.Limit))
	}
	if c.Strategy != "" && !slices.Contains(ConcurrencyStrategies, c.Strategy) {
		names := make([]string, len(ConcurrencyStrategies))
		for i, s := range ConcurrencyStrategies {
			names[i] = string(s)
		}
		ps.add("concurrency.strategy", fmt.Sprintf("unknown strategy %q (want one of %s)", c.Strategy, strings.Join(names, ", ")))
	}
	if c.Key == "" {
		return
	}
	_, err := CompileStringTemplate(c.Key, noSteps)
	var te *TemplateError
	switch {
	case errors.As(err, &te):
		for _, p := range te.Problems {
			ps.add("concurrency.key"+p.Path, p.Message)
		}
	case err != nil:
		ps.add("concurrency.key", err.Error())
	}
}
