package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/flowd/flowd/internal/dsn"
	"github.com/flowd/flowd/internal/storeopen"
	"github.com/flowd/flowd/store"
)

// Backoff between tries to reach a database that does not answer yet:
// doubling from the first to the longest.
const (
	dbWaitFirstBackoff = 250 * time.Millisecond
	dbWaitMaxBackoff   = 5 * time.Second
)

// openDatabase opens db, waiting up to wait for a database that does not
// answer yet (store.ErrUnavailable: refused connections, a server starting
// up), so that a node started before its database, or during its restart,
// comes up with it instead of exiting and being restarted in a storm. Each
// failed try is logged with the address redacted. Any other error (a wrong
// password, a malformed address) is returned at once, as is the last one
// once wait has passed. wait 0 tries once.
func openDatabase(ctx context.Context, db string, wait time.Duration, log *slog.Logger) (store.Backend, error) {
	start := time.Now()
	deadline := start.Add(wait)
	backoff := dbWaitFirstBackoff
	for try := 1; ; try++ {
		tryCtx, cancel := ctx, context.CancelFunc(func() {})
		if wait > 0 {
			// A try that hangs (a host that drops packets) must not
			// outlast the wait; one second is left to the last try at least.
			tryCtx, cancel = context.WithDeadline(ctx, latest(deadline, time.Now().Add(time.Second)))
		}
		st, err := storeopen.Open(tryCtx, db, storeopen.Options{})
		cancel()
		if err == nil {
			if try > 1 {
				log.Info("database answered", "db", dsn.Redact(db), "tries", try, "waited", time.Since(start).Round(time.Millisecond))
			}
			return st, nil
		}
		if wait <= 0 || !errors.Is(err, store.ErrUnavailable) {
			return nil, err
		}
		left := time.Until(deadline)
		if left <= 0 || ctx.Err() != nil {
			return nil, fmt.Errorf("the database %s did not answer within %s (--db-wait), after %d tries: %w", dsn.Redact(db), wait, try, err)
		}
		pause := min(backoff, left)
		log.Warn("database not answering yet; trying again", "db", dsn.Redact(db), "try", try, "retry_in", pause, "wait_left", left.Round(time.Millisecond), "err", err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the database %s: %w", dsn.Redact(db), context.Cause(ctx))
		case <-time.After(pause):
		}
		backoff = min(2*backoff, dbWaitMaxBackoff)
	}
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
