package postgres

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/store"
)

var _ store.Listener = (*Store)(nil)

const (
	// notifyChannel is the channel Notify signals and Listen listens on.
	notifyChannel = "flowd_tasks"

	// Reconnection backoff of a listener: doubling from min to max, with
	// full jitter.
	listenBackoffMin = 100 * time.Millisecond
	listenBackoffMax = 5 * time.Second

	// closeTimeout bounds the goodbye to the server when a listener's
	// connection is closed.
	closeTimeout = time.Second
)

// Listen returns a channel that receives a value (coalesced: the buffer holds
// one) whenever a Notify is committed anywhere on the database, until ctx ends
// or the store is closed; then the channel is closed.
//
// The listener has a connection of its own, outside the pool, so it never
// takes a connection from the queries' budget. After losing it (server
// restart, pg_terminate_backend, network) it reconnects with backoff and
// sends once on the channel, because notifications sent while it was away
// are lost: the receiver should look for work then. Listen's own error is
// that of the first connection (or errClosed after Close).
func (s *Store) Listen(ctx context.Context) (<-chan struct{}, error) {
	conn, err := s.connectListener(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		closeConn(ctx, conn)
		return nil, errClosed
	}
	ch := make(chan struct{}, 1)
	s.listeners.Add(1)
	go s.listen(ctx, conn, ch)
	return ch, nil
}

// errClosed is Listen's error on a closed store.
var errClosed = errors.New("postgres: listen: the store is closed")

// connectListener opens a connection with the pool's settings and runs
// LISTEN on it.
func (s *Store) connectListener(ctx context.Context) (*pgx.Conn, error) {
	cfg := s.pool.Config().ConnConfig.Copy()
	// The caller's tracer watches the store's statements, not the
	// listener's waiting.
	cfg.Tracer = nil
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, interpretError(err, "")
	}
	if _, err := conn.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		closeConn(ctx, conn)
		return nil, interpretError(err, "")
	}
	return conn, nil
}

// listen waits for notifications on conn, reconnecting when it fails, until
// ctx ends or the store closes; then it closes conn and ch.
func (s *Store) listen(ctx context.Context, conn *pgx.Conn, ch chan<- struct{}) {
	defer s.listeners.Done()
	defer close(ch)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Close ends the listener like ctx does.
	go func() {
		select {
		case <-s.closing:
			cancel()
		case <-ctx.Done():
		}
	}()

	backoff := listenBackoffMin
	for {
		if conn == nil {
			// Full jitter: nodes that lost their connections together do
			// not reconnect together.
			select {
			case <-ctx.Done():
				return
			case <-time.After(rand.N(backoff) + time.Millisecond):
			}
			backoff = min(2*backoff, listenBackoffMax)
			var err error
			if conn, err = s.connectListener(ctx); err != nil {
				continue
			}
			backoff = listenBackoffMin
			wake(ch)
		}
		if _, err := conn.WaitForNotification(ctx); err != nil {
			closeConn(ctx, conn)
			conn = nil
			if ctx.Err() != nil {
				return
			}
			continue
		}
		wake(ch)
	}
}

// wake sends on ch unless a wake-up is already pending.
func wake(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// closeConn closes conn on a context that is not cancelled, so that the
// server is told even when ctx has ended.
func closeConn(ctx context.Context, conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	_ = conn.Close(ctx)
}
