package observed

import (
	"errors"
	"time"

	"github.com/flowd/flowd/metrics"
	"github.com/flowd/flowd/store"
)

// observe records one write of op; wrote says whether a success stored
// anything (see noteWrite).
func (q querier) observe(op string, start time.Time, err error, wrote bool) {
	if q.o.m == nil {
		return
	}
	q.o.m.StateUpdates.WithLabelValues(op, metrics.Result(err)).Inc()
	q.o.m.UpdateDuration.WithLabelValues(op).Observe(time.Since(start).Seconds())
	q.noteWrite(err, wrote)
}

// observeGroup records an ApplyGroup: every write of the group counts under
// its own op (the claim of a failed group once, if it got as far as
// deciding); the duration is the group's, observed once for each op in it.
func (q querier) observeGroup(start time.Time, err error, creates, writes int, claimWrites []*store.ClaimWrite, decided bool) {
	if q.o.m == nil {
		return
	}
	claimed := writtenStates(claimWrites)
	q.noteWrite(err, creates+writes+claimed > 0)
	if err != nil && decided {
		claimed = 1
	}
	for _, g := range []struct {
		op string
		n  int
	}{{"create", creates}, {"apply", writes}, {"claim", claimed}} {
		if g.n > 0 {
			q.o.m.StateUpdates.WithLabelValues(g.op, metrics.Result(err)).Add(float64(g.n))
			q.o.m.UpdateDuration.WithLabelValues(g.op).Observe(time.Since(start).Seconds())
		}
	}
}

// observeClaim records a ClaimTasks: every instance written counts; the
// duration is the claim's, observed once, when it wrote or failed.
func (q querier) observeClaim(start time.Time, err error, writes []*store.ClaimWrite) {
	if q.o.m == nil {
		return
	}
	n := writtenStates(writes)
	q.noteWrite(err, n > 0)
	switch {
	case err != nil:
		q.o.m.StateUpdates.WithLabelValues("claim", metrics.Result(err)).Inc()
	case n > 0:
		q.o.m.StateUpdates.WithLabelValues("claim", metrics.Result(nil)).Add(float64(n))
	default:
		return
	}
	q.o.m.UpdateDuration.WithLabelValues("claim").Observe(time.Since(start).Seconds())
}

// writtenStates counts the claim writes that wrote an instance.
func writtenStates(writes []*store.ClaimWrite) int {
	n := 0
	for _, w := range writes {
		if w != nil && w.Written && w.SetState {
			n++
		}
	}
	return n
}

// noteWrite records the outcome of a write for flowd_storage_full. wrote
// says whether a successful one stored anything: an empty claim or sweep
// proves nothing about space, and the engine runs those all the time.
// Every write of the server passes this wrapper, so this is the one place
// that sees them all.
func (q querier) noteWrite(err error, wrote bool) {
	switch {
	case q.o.m == nil:
	case errors.Is(err, store.ErrStorageFull):
		q.o.m.SetStorageFull(true)
	case err != nil || !wrote:
	default:
		q.o.m.SetStorageFull(false)
	}
}

// deleted counts n instances deleted.
func (q querier) deleted(n int) {
	if q.o.m != nil {
		q.o.m.WorkflowsDeleted.Add(float64(n))
	}
}
