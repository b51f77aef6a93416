package engine

import (
	"sync"
	"time"

	"github.com/flowd/flowd/store"
)

// The engine's side of step concurrency keys and rate limits: the store's
// claims check them (store.FlowGate); the engine counts what they held
// back and wakes its waiting workers when a held-back task can go. A slot
// a key frees wakes them through the write that frees it (rules: a task
// under a key that stops being leased makes the change Notify, which
// reaches every node); a token wakes them through tokenWake, on the node
// whose claim found the bucket empty, and the poll interval covers the
// other nodes.

// heldBack counts what a committed claim's keys held back (the store
// returns it with the claim, after its transaction has ended) and, when a
// rate limit made tasks wait, wakes the waiters when the next token is
// due.
func (e *Engine) heldBack(h store.HeldBack) {
	if !h.Any() {
		return
	}
	if e.m != nil {
		e.m.FlowControl.ConcurrencyWaits.Add(float64(h.Concurrency))
		e.m.FlowControl.RateLimitWaits.Add(float64(h.Rate + h.RateEmptied))
	}
	if !h.RateRetryAt.IsZero() {
		e.tokenWake.at(h.RateRetryAt.Sub(e.clock()), e.wake)
	}
}

// maxTokenWait bounds how far ahead a token wake is set: a bucket read
// under another node's clock (or a test's) must not park it for long.
const maxTokenWait = time.Minute

// tokenWake is one timer that calls wake when the earliest token a claim
// waits for is due; later tokens wait for the wake-up of the earlier one.
type tokenWake struct {
	mu    sync.Mutex
	timer *time.Timer
	due   time.Time
}

// at calls wake after d (at least a millisecond, at most maxTokenWait),
// unless an earlier wake is already set.
func (t *tokenWake) at(d time.Duration, wake func()) {
	d = min(max(d, time.Millisecond), maxTokenWait)
	due := time.Now().Add(d)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.timer != nil && !t.due.After(due) && time.Now().Before(t.due) {
		return
	}
	if t.timer != nil {
		t.timer.Stop()
	}
	t.due = due
	t.timer = time.AfterFunc(d, wake)
}
