package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flowd/flowd/store"
)

// maxLoggedErrors bounds the errors written to Progress; the rest are counted.
const maxLoggedErrors = 5

// errEmpty is returned by an operation that found nothing to do (a batch with
// no row to move): neither an op nor an error.
var errEmpty = errors.New("nothing to do")

// runner holds what every scenario shares: the counters, the clients, the
// progress output and the run's id prefix.
type runner struct {
	cfg    Config
	ctx    context.Context // the caller's; its end interrupts the run
	s      store.Backend
	out    *lockedWriter // nil: no output
	runID  string
	prefix string // of every instance id this run creates

	ops, conflicts, retries, errs, interrupted, empty atomic.Int64
	logged                                            atomic.Int64

	stop     chan struct{} // closed when clients must not start another op
	stopped  time.Time     // when stop was closed
	started  time.Time     // when the clients started
	clients  []*client
	progress func() string // optional extra text for the progress line
}

func newRunner(ctx context.Context, cfg Config) *runner {
	id := time.Now().UTC().Format("20060102t150405") + fmt.Sprintf("%04x", rand.N(1<<16))
	r := &runner{cfg: cfg, ctx: ctx, s: cfg.Store, runID: id, prefix: benchIDPrefix + string(cfg.Scenario) + "-" + id + "-"}
	if cfg.Progress != nil {
		r.out = &lockedWriter{w: cfg.Progress}
	}
	return r
}

// lockedWriter serialises the writes of the progress line, error logs and
// engine logs, which come from different goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (r *runner) logf(format string, args ...any) {
	if r.out != nil {
		fmt.Fprintf(r.out, "flowd bench: "+format+"\n", args...)
	}
}

// fail counts an error and logs the first few.
func (r *runner) fail(op, id string, err error) {
	r.errs.Add(1)
	switch n := r.logged.Add(1); {
	case n <= maxLoggedErrors:
		r.logf("error: %s %s: %v", op, id, err)
	case n == maxLoggedErrors+1:
		r.logf("more errors: counted, not logged")
	}
}

// classify counts the outcome of one failed operation. An operation cut short
// because the caller's context ended is neither a conflict nor an error.
func (r *runner) classify(op, id string, err error) {
	switch {
	case errors.Is(err, errEmpty):
		r.empty.Add(1)
	case errors.Is(err, store.ErrConflict):
		r.conflicts.Add(1)
	case r.ctx.Err() != nil:
		r.interrupted.Add(1)
	default:
		r.fail(op, id, err)
	}
}

// client is one of the concurrent clients; it is used by its goroutine only.
type client struct {
	r   *runner
	id  int
	lat []time.Duration // of the successful operations
}

// running reports whether the client may start another operation.
func (c *client) running() bool {
	select {
	case <-c.r.stop:
		return false
	default:
		return true
	}
}

// do runs one timed operation and counts its outcome; it returns op's error.
func (c *client) do(op, id string, fn func() error) error {
	t0 := time.Now()
	err := fn()
	if err == nil {
		c.lat = append(c.lat, time.Since(t0))
		c.r.ops.Add(1)
		return nil
	}
	c.r.classify(op, id, err)
	return err
}

// runClients runs fn in cfg.Clients goroutines until cfg.Duration has passed
// (or ctx ends, or every client has returned of its own accord, as the
// history scenario's do) and they have all returned, printing progress
// meanwhile. It
// returns the time from the start to the last client's return: operations in
// flight at the deadline are finished, not abandoned, so they are counted.
func (r *runner) runClients(ctx context.Context, fn func(ctx context.Context, c *client)) time.Duration {
	r.stop = make(chan struct{})
	r.started = time.Now()
	var wg sync.WaitGroup
	for i := range r.cfg.Clients {
		c := &client{r: r, id: i, lat: make([]time.Duration, 0, 1024)}
		r.clients = append(r.clients, c)
		wg.Go(func() { fn(ctx, c) })
	}
	done := make(chan struct{})
	var pw sync.WaitGroup
	pw.Go(func() { r.printProgress(done) })

	returned := make(chan struct{})
	go func() { wg.Wait(); close(returned) }()
	timer := time.NewTimer(r.cfg.Duration)
	select {
	case <-timer.C:
	case <-ctx.Done():
		timer.Stop()
	case <-returned:
		timer.Stop()
	}
	r.stopped = time.Now()
	close(r.stop)
	wg.Wait()
	elapsed := time.Since(r.started)
	close(done)
	pw.Wait()
	return elapsed
}

func (r *runner) printProgress(done <-chan struct{}) {
	if r.out == nil {
		return
	}
	tick := time.NewTicker(r.cfg.ProgressInterval)
	defer tick.Stop()
	last, lastAt := int64(0), r.started
	for {
		select {
		case <-done:
			return
		case now := <-tick.C:
			ops := r.ops.Load()
			rate := float64(ops-last) / now.Sub(lastAt).Seconds()
			last, lastAt = ops, now
			extra := ""
			if r.progress != nil {
				extra = " " + r.progress()
			}
			r.logf("%s %5.1fs ops=%d ops/s=%.0f conflicts=%d retries=%d errors=%d%s",
				r.cfg.Scenario, now.Sub(r.started).Seconds(), ops, rate, r.conflicts.Load(), r.retries.Load(), r.errs.Load(), extra)
		}
	}
}

// result fills the fields every scenario shares from the counters and the
// clients' latencies.
func (r *runner) result(elapsed time.Duration) Result {
	var lat []time.Duration
	for _, c := range r.clients {
		lat = append(lat, c.lat...)
	}
	res := Result{
		Scenario:  r.cfg.Scenario,
		Clients:   r.cfg.Clients,
		Ops:       r.ops.Load(),
		Conflicts: r.conflicts.Load(),
		Retries:   r.retries.Load(),
		Errors:    r.errs.Load(),
		Backend:   r.s.Capabilities().Name,
		IDPrefix:  r.prefix,
		Mode:      r.cfg.Mode,
	}
	res.setTiming(elapsed, lat)
	return res
}

// setTiming sets the duration, the rate and the percentiles of lat.
func (res *Result) setTiming(elapsed time.Duration, lat []time.Duration) {
	res.DurationS = seconds(elapsed)
	if elapsed > 0 {
		res.OpsPerSec = round3(float64(res.Ops) / elapsed.Seconds())
	}
	slices.Sort(lat)
	res.P50MS = ms(percentile(lat, 0.50))
	res.P90MS = ms(percentile(lat, 0.90))
	res.P99MS = ms(percentile(lat, 0.99))
	if len(lat) > 0 {
		res.MaxMS = ms(lat[len(lat)-1])
	}
}

// kept returns the latencies lat[i] whose keep[i] is true, in order: those
// of the operations a check found done.
func kept(lat []time.Duration, keep []bool) []time.Duration {
	var out []time.Duration
	for i, ok := range keep {
		if ok {
			out = append(out, lat[i])
		}
	}
	return out
}

// percentile is the nearest-rank percentile of sorted durations (0 if none).
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(float64(len(sorted))*p)) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return round3(float64(d) / float64(time.Millisecond)) }
