package engine

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/flowd/flowd/store"
)

const (
	// WorkersWindow is how long a worker stays listed after its last poll.
	WorkersWindow = 5 * time.Minute
	// workerRecordInterval is how often a (worker, node) that keeps polling
	// for the same handlers is written: polls in between cost no write.
	workerRecordInterval = 5 * time.Second
	// workerPruneInterval is how often the sweeper deletes the workers that
	// have left the window.
	workerPruneInterval = time.Minute
	// workerSeenLimit bounds the in-memory map before it is pruned of
	// workers that have left the window.
	workerSeenLimit = 1024
)

// workerSeen is the last record this node wrote for one worker.
type workerSeen struct {
	handlers string // the sorted handler names, joined with NUL
	at       time.Time
}

// ListWorkers returns the remote workers and in-process pools of every node
// that polled in the last WorkersWindow, the most recent poll first.
func (e *Engine) ListWorkers(ctx context.Context) ([]store.WorkerRecord, error) {
	return e.st.ListWorkers(ctx, e.now().Add(-WorkersWindow))
}

// workerRecord is the record of worker polling for handlers on this node,
// checked as the store checks it: a worker the store would refuse is refused
// before its poll does anything.
func (e *Engine) workerRecord(worker string, handlers []string) (store.WorkerRecord, error) {
	w := store.WorkerRecord{Worker: worker, Handlers: slices.Clone(handlers), Node: e.node}
	return w, w.Normalize()
}

// noteWorker records that w polls now, unless this node recorded the same
// handlers for it less than workerRecordInterval ago: a worker polling in a
// tight loop costs one small write every few seconds, not one per poll.
// A failed write is logged, not returned: it must not fail the poll.
func (e *Engine) noteWorker(ctx context.Context, w store.WorkerRecord) {
	now := e.now()
	seen := workerSeen{handlers: strings.Join(w.Handlers, "\x00"), at: now}
	e.seenMu.Lock()
	last, ok := e.seen[w.Worker]
	if ok && last.handlers == seen.handlers && now.Sub(last.at) < workerRecordInterval {
		e.seenMu.Unlock()
		return
	}
	if len(e.seen) >= workerSeenLimit {
		maps.DeleteFunc(e.seen, func(_ string, s workerSeen) bool { return now.Sub(s.at) > WorkersWindow })
	}
	e.seen[w.Worker] = seen
	e.seenMu.Unlock()

	w.LastPollAt = now
	if err := e.st.RecordWorker(ctx, w); err != nil {
		if ctx.Err() == nil {
			e.log.Warn("recording a polling worker", "worker", w.Worker, "err", err)
		}
		// Let the next poll try again.
		e.seenMu.Lock()
		if e.seen[w.Worker] == seen {
			delete(e.seen, w.Worker)
		}
		e.seenMu.Unlock()
	}
}

// recordPool keeps this node's in-process pool listed while its workers run:
// worker and node are the node id, handlers the registered names.
func (e *Engine) recordPool(ctx context.Context) {
	w, err := e.workerRecord(e.node, slices.Collect(maps.Keys(e.handlers)))
	if err != nil {
		e.log.Warn("the in-process workers cannot be listed", "err", err)
		return
	}
	t := time.NewTicker(workerRecordInterval)
	defer t.Stop()
	for {
		e.noteWorker(ctx, w)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pruneWorkers deletes the workers that left the window, at most once per
// workerPruneInterval per node.
func (e *Engine) pruneWorkers(ctx context.Context) error {
	now := e.now()
	e.seenMu.Lock()
	due := now.Sub(e.lastPrune) >= workerPruneInterval
	if due {
		e.lastPrune = now
	}
	e.seenMu.Unlock()
	if !due {
		return nil
	}
	_, err := e.st.Prune(ctx, store.PruneParams{Kind: store.PruneWorkers, Before: now.Add(-WorkersWindow)})
	return err
}
