package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// WorkerStore records which workers poll for which handlers, so that every
// node of a cluster can list the workers of all of them.
type WorkerStore interface {
	// RecordWorker stores that w.Worker, served by w.Node, polled for
	// w.Handlers at w.LastPollAt: one row per (worker, node), replaced by
	// each call. Errors: ErrInvalidArgument (see WorkerRecord.Normalize).
	RecordWorker(ctx context.Context, w WorkerRecord) error
	// ListWorkers returns the workers that polled at or after since, the
	// most recent poll first, then by worker and node, each with the
	// number of tasks leased to it now (InFlight).
	ListWorkers(ctx context.Context, since time.Time) ([]WorkerRecord, error)
}

// WorkerRecord is one worker as a node last saw it polling.
type WorkerRecord struct {
	Worker     string    `json:"worker"`
	Handlers   []string  `json:"handlers"`
	Node       string    `json:"node"`
	LastPollAt time.Time `json:"last_poll_at"`
	// InFlight is how many tasks are LEASED to Worker now: a lease names
	// the worker that holds it, not the node that served the poll, so
	// every node's row of a worker counts the same tasks. ListWorkers
	// fills it; RecordWorker ignores it.
	InFlight int `json:"in_flight"`
}

// Bounds of a WorkerRecord.
const (
	MaxWorkerNameLength = 256
	MaxWorkerHandlers   = 1000
)

// Normalize validates w and puts it in the form every backend stores: handlers
// sorted without duplicates (never nil), LastPollAt as Timestamp.
func (w *WorkerRecord) Normalize() error {
	if err := checkWorkerText("worker name", w.Worker); err != nil {
		return err
	}
	if err := checkWorkerText("node", w.Node); err != nil {
		return err
	}
	if len(w.Handlers) > MaxWorkerHandlers {
		return fmt.Errorf("%w: a worker may poll for at most %d handlers, not %d", ErrInvalidArgument, MaxWorkerHandlers, len(w.Handlers))
	}
	hs := make([]string, 0, len(w.Handlers))
	for _, h := range w.Handlers {
		if err := checkWorkerText("handler name", h); err != nil {
			return err
		}
		hs = append(hs, h)
	}
	slices.Sort(hs)
	w.Handlers = slices.Compact(hs)
	w.LastPollAt = Timestamp(w.LastPollAt)
	return nil
}

func checkWorkerText(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: %s is empty", ErrInvalidArgument, what)
	case len(s) > MaxWorkerNameLength:
		return fmt.Errorf("%w: %s is %d bytes long, at most %d are allowed", ErrInvalidArgument, what, len(s), MaxWorkerNameLength)
	case !utf8.ValidString(s) || strings.ContainsRune(s, 0):
		return fmt.Errorf("%w: %s is not valid UTF-8 text without NUL characters", ErrInvalidArgument, what)
	}
	return nil
}
