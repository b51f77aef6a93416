package store_test

import (
	"testing"
	"time"

	"github.com/flowd/flowd/store"
)

// Deliver counts the attempt and ends the lease after its duration or at
// the attempt's deadline, whichever is first; a task without a timeout
// has no deadline.
func TestDeliverBoundsTheLeaseByTheAttemptTimeout(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		name                string
		timeout, lease      time.Duration
		wantUntil, deadline time.Duration // after now; deadline 0: none
	}{
		{"no timeout", 0, time.Minute, time.Minute, 0},
		{"a timeout shorter than the lease", 10 * time.Second, time.Minute, 10 * time.Second, 10 * time.Second},
		{"a timeout longer than the lease", time.Hour, time.Minute, time.Minute, time.Hour},
	} {
		tk := &store.Task{Status: store.TaskQueued, Attempt: 2, AttemptTimeout: c.timeout, AttemptDeadline: now}
		tk.Deliver("node-1", "lease-1", now, c.lease)
		var wantDeadline time.Time
		if c.deadline > 0 {
			wantDeadline = now.Add(c.deadline)
		}
		if tk.Status != store.TaskLeased || tk.Attempt != 3 || tk.Lease != "lease-1" || tk.LeaseOwner != "node-1" ||
			!tk.LeaseUntil.Equal(now.Add(c.wantUntil)) || !tk.AttemptDeadline.Equal(wantDeadline) {
			t.Errorf("%s: delivered %s attempt %d lease %q to %q until %v, deadline %v; want LEASED attempt 3 lease-1 to node-1 until %v, deadline %v",
				c.name, tk.Status, tk.Attempt, tk.Lease, tk.LeaseOwner, tk.LeaseUntil, tk.AttemptDeadline, now.Add(c.wantUntil), wantDeadline)
		}
	}
}
