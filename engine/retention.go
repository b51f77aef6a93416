package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// Retention is counted in hours or days, so the retention sweep need not
// run at every sweep: once per retentionInterval an instance outlives its
// retention by at most that much, and each node reads the definitions and
// looks for expired instances once a minute instead of every second.
// retentionRounds bounds the batches of one sweep, so that a backlog (a
// retention just switched on over a large database) is worked off over
// several sweeps instead of holding up timeouts and lease expiries; while
// one remains, the next sweep goes on at once.
const (
	retentionInterval = time.Minute
	retentionRounds   = 10
)

// retentionSweep remembers when the retention sweep is due again.
type retentionSweep struct {
	mu   sync.Mutex
	next time.Time
}

// due reports whether the sweep should run at now.
func (r *retentionSweep) due(now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !now.Before(r.next)
}

// ran records a sweep at now: due again after retentionInterval, or at
// the next sweep when it left a backlog.
func (r *retentionSweep) ran(now time.Time, backlog bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if backlog {
		r.next = now
	} else {
		r.next = now.Add(retentionInterval)
	}
}

// deleteExpired deletes the finished instances whose retention has passed,
// in batches of store.MaxDeleteFinished, each its own transaction. Every
// node runs it; Prune makes sure no two delete the same instance.
// A failed sweep is tried again at the next one.
func (e *Engine) deleteExpired(ctx context.Context) error {
	now := e.clock()
	if !e.expiry.due(now) {
		return nil
	}
	p, err := e.retentionParams(ctx, now)
	if err != nil {
		return err
	}
	if _, due := p.Latest(); !due {
		e.expiry.ran(now, false) // no retention anywhere: nothing to look for
		return nil
	}
	for range retentionRounds {
		pruned, err := e.st.Prune(ctx, p)
		if err != nil {
			return fmt.Errorf("deleting expired workflows: %w", err)
		}
		if ids := pruned.IDs; len(ids) > 0 {
			e.log.Info("deleted expired workflows", "count", len(ids), "first", ids[0], "last", ids[len(ids)-1])
		}
		if pruned.Count < p.Limit {
			e.expiry.ran(now, false)
			return nil
		}
	}
	e.expiry.ran(now, true)
	return nil
}

// retentionParams gives every definition with a retention of its own its
// cutoff, and the others (and free-form instances) the server's. The
// latest revision of a definition decides for all its instances, whichever
// revision they ran: retention is a policy of the definition's name, and
// changing it applies at once. Instances of a deleted definition follow
// the server's retention.
func (e *Engine) retentionParams(ctx context.Context, now time.Time) (store.PruneParams, error) {
	p := store.PruneParams{Kind: store.PruneInstances, Limit: store.MaxDeleteFinished}
	if e.retention > 0 {
		p.Before = now.Add(-e.retention)
	}
	defs, err := e.defs.ListDefinitions(ctx, store.ListDefinitionsParams{})
	if err != nil {
		return p, fmt.Errorf("reading the definitions' retention: %w", err)
	}
	for _, d := range defs {
		var own struct {
			Retention *workflow.Duration `json:"retention"`
		}
		if err := json.Unmarshal(d.Spec, &own); err != nil {
			// Not reached: stored specs are canonical, checked definitions.
			// Their instances keep the server's retention meanwhile.
			e.log.Warn("reading a definition's retention", "definition", d.Name, "revision", d.Revision, "err", err)
			continue
		}
		if own.Retention == nil {
			continue
		}
		if p.Definitions == nil {
			p.Definitions = map[string]time.Time{}
		}
		var cutoff time.Time // retention 0: kept for ever
		if r := time.Duration(*own.Retention); r > 0 {
			cutoff = now.Add(-r)
		}
		p.Definitions[d.Name] = cutoff
	}
	return p, nil
}
