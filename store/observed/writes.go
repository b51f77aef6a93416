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

// observeGroup records an ApplyGroup: every create and write of the
// group counts under its own op; the duration is the group's, observed
// once for each op in it. leased, the tasks its claim leased, count for
// the storage gauge alone (a claim writes no instance).
func (q querier) observeGroup(start time.Time, err error, creates, writes, leased int) {
	if q.o.m == nil {
		return
	}
	q.noteWrite(err, creates+writes+leased > 0)
	for _, g := range []struct {
		op string
		n  int
	}{{"create", creates}, {"apply", writes}} {
		if g.n > 0 {
			q.o.m.StateUpdates.WithLabelValues(g.op, metrics.Result(err)).Add(float64(g.n))
			q.o.m.UpdateDuration.WithLabelValues(g.op).Observe(time.Since(start).Seconds())
		}
	}
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
