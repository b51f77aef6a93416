package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// createsPerTx is how many instances prepare creates in one transaction.
const createsPerTx = 250

// createMany creates n instances from p(i) in groups of createsPerTx,
// several at once where the backend has concurrent writers.
func (r *runner) createMany(ctx context.Context, n int, p func(i int) store.CreateParams) error {
	return r.forEach(ctx, (n+createsPerTx-1)/createsPerTx, func(chunk int) error {
		lo, hi := chunk*createsPerTx, min((chunk+1)*createsPerTx, n)
		ps := make([]store.CreateParams, 0, hi-lo)
		for i := lo; i < hi; i++ {
			ps = append(ps, p(i))
		}
		_, _, err := r.s.ApplyGroup(ctx, ps, nil, nil)
		return err
	})
}

// forEach calls fn(0…n-1) from a few goroutines (one where writes are
// serialised anyway) and returns the first error; it stops early on one.
func (r *runner) forEach(ctx context.Context, n int, fn func(i int) error) error {
	workers := 1
	if r.s.Capabilities().ConcurrentWriters {
		workers = 8
	}
	var (
		next  atomic.Int64
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	for range min(workers, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					next.Store(int64(n)) // stop the others
					return
				}
			}
		})
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// counterState is a free-form state whose variable "counter" is 0, padded to
// about size bytes of JSON.
func counterState(size int) workflow.State {
	pad, _ := json.Marshal(strings.Repeat("x", max(0, size-48)))
	return workflow.State{Variables: map[string]json.RawMessage{
		"counter": json.RawMessage("0"),
		"padding": pad,
	}}
}

// counter reads variable "counter" of s.
func counter(s workflow.State) (int64, error) {
	var n int64
	ok, err := s.Var("counter", &n)
	if err == nil && !ok {
		err = fmt.Errorf("no variable counter")
	}
	return n, err
}

// increment adds 1 to variable "counter".
func increment(s *workflow.State) error {
	n, err := counter(*s)
	if err != nil {
		return err
	}
	return s.SetVar("counter", n+1)
}

// unaccounted is how far observed changes are from the recorded successes:
// successes the data does not hold, plus changes nobody recorded beyond the
// operations whose outcome is unknown (those that failed other than by a
// conflict: they may have committed).
func unaccounted(recorded, unknown, observed int64) int64 {
	switch {
	case observed < recorded:
		return recorded - observed
	case observed > recorded+unknown:
		return observed - recorded - unknown
	}
	return 0
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// mismatches logs the first few inconsistencies the check finds.
type mismatches struct {
	r *runner
	n atomic.Int64
}

func (m *mismatches) report(format string, args ...any) {
	switch n := m.n.Add(1); {
	case n <= maxLoggedErrors:
		m.r.logf("LOST: "+format, args...)
	case n == maxLoggedErrors+1:
		m.r.logf("LOST: more inconsistencies: counted, not logged")
	}
}
