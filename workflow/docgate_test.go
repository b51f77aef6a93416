package workflow

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// gate1M is the gate of a node whose states are bounded by 1 MiB: a pool of
// 16 MiB, 4 MiB of it for small documents (at most 64 KiB each), 12 MiB
// first come, first served.
func gate1M(t *testing.T) *DocGate {
	t.Helper()
	g := NewDocGate(1 << 20)
	if g.Pool() != 16<<20 || g.smallPool != 4<<20 || g.largePool != 12<<20 || g.smallMax != 64<<10 {
		t.Fatalf("gate of 1 MiB states: pool %d, small %d (each at most %d), large %d", g.Pool(), g.smallPool, g.smallMax, g.largePool)
	}
	return g
}

// acquireAsync starts an Acquire and returns a channel that gets its
// release (or its error) once it returns.
type acquired struct {
	release func()
	err     error
}

func acquireAsync(ctx context.Context, g *DocGate, weight int64) <-chan acquired {
	ch := make(chan acquired, 1)
	go func() {
		r, err := g.Acquire(ctx, weight)
		ch <- acquired{r, err}
	}()
	return ch
}

// waiting reports whether ch has not answered within a short while.
func waiting(ch <-chan acquired) bool {
	select {
	case <-ch:
		return false
	case <-time.After(50 * time.Millisecond):
		return true
	}
}

func mustAcquire(t *testing.T, g *DocGate, weight int64) func() {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := g.Acquire(ctx, weight)
	if err != nil {
		t.Fatalf("Acquire(%d): %v", weight, err)
	}
	return r
}

func TestDocGateDefaultPool(t *testing.T) {
	t.Parallel()
	for _, max := range []int{0, -1, 4 << 20} {
		if got := NewDocGate(max).Pool(); got != 64<<20 {
			t.Errorf("NewDocGate(%d).Pool() = %d, want 64 MiB (16 × 4 MiB)", max, got)
		}
	}
	if got := NewDocGate(8 << 20).Pool(); got != 128<<20 {
		t.Errorf("NewDocGate(8 MiB).Pool() = %d, want 128 MiB", got)
	}
	var none *DocGate
	release, err := none.Acquire(context.Background(), 1<<40)
	if err != nil {
		t.Fatalf("a nil gate: %v", err)
	}
	release()
}

func TestDocGateWeights(t *testing.T) {
	t.Parallel()
	g := gate1M(t)
	a := mustAcquire(t, g, 6<<20)
	b := mustAcquire(t, g, 6<<20) // the first-come part is full
	third := acquireAsync(context.Background(), g, 1<<20)
	if !waiting(third) {
		t.Fatal("a third document got its weight while 12 MiB of 12 were taken")
	}
	// Small documents do not wait behind it: they have their own part.
	smalls := make([]func(), 0, 64)
	for range 64 {
		smalls = append(smalls, mustAcquire(t, g, 64<<10))
	}
	// The small part is full now: the next small one waits in line, behind
	// the third.
	small := acquireAsync(context.Background(), g, 1<<10)
	if !waiting(small) {
		t.Fatal("a small document got its weight with both parts full")
	}
	a()
	if r := <-third; r.err != nil {
		t.Fatal(r.err)
	} else {
		defer r.release()
	}
	if r := <-small; r.err != nil {
		t.Fatal(r.err)
	} else {
		r.release()
	}
	b()
	for _, r := range smalls {
		r()
	}
}

// A document heavier than the pool takes the whole first-come part and
// runs alone there; it never waits for ever, and those after it wait for
// it (first come, first served), small ones aside.
func TestDocGateWholePool(t *testing.T) {
	t.Parallel()
	g := gate1M(t)
	held := mustAcquire(t, g, 1<<20)
	huge := acquireAsync(context.Background(), g, 1<<30)
	if !waiting(huge) {
		t.Fatal("a document heavier than the pool got it while 1 MiB was taken")
	}
	// It came first: a document that would fit waits behind it.
	after := acquireAsync(context.Background(), g, 1<<20)
	if !waiting(after) {
		t.Fatal("a document passed the heavy one waiting before it")
	}
	held()
	r := <-huge
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !waiting(after) {
		t.Fatal("a document got its weight while a heavy one held the whole pool")
	}
	small := mustAcquire(t, g, 1<<10) // small documents keep their part
	small()
	r.release()
	if r := <-after; r.err != nil {
		t.Fatal(r.err)
	} else {
		r.release()
	}
}

func TestDocGateContext(t *testing.T) {
	t.Parallel()
	g := gate1M(t)
	all := mustAcquire(t, g, 12<<20)
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := acquireAsync(ctx, g, 1<<20)
	if !waiting(gaveUp) {
		t.Fatal("got a weight from a full pool")
	}
	cancel()
	select {
	case r := <-gaveUp:
		if !errors.Is(r.err, context.Canceled) || r.release != nil {
			t.Fatalf("a wait whose context ended: %v", r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a wait whose context ended goes on")
	}
	// An ended context before the wait: nothing taken either.
	if _, err := g.Acquire(ctx, 1<<20); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire with an ended context: %v", err)
	}
	all()
	// Nothing of the waits that gave up is held: the whole pool is free.
	mustAcquire(t, g, 12<<20)()
}

func TestDocGateReleaseOnce(t *testing.T) {
	t.Parallel()
	g := gate1M(t)
	for _, weight := range []int64{1 << 10, 4 << 20, 1 << 30} {
		r := mustAcquire(t, g, weight)
		r()
		r() // a second call gives nothing back again
	}
	all := mustAcquire(t, g, 12<<20)
	if more := acquireAsync(context.Background(), g, 1<<20); !waiting(more) {
		t.Fatal("releasing twice gave back more than was taken")
	} else {
		all()
		if r := <-more; r.err == nil {
			r.release()
		}
	}
}

// Many decisions at once, of every size: the weights held never pass the
// pool nor its first-come part, a document heavier than the pool is alone
// there, and every one gets its turn. What the test counts is taken after
// Acquire returns and given back before release: never more than the gate
// holds, so a count past a bound is the gate's fault.
func TestDocGateConcurrent(t *testing.T) {
	t.Parallel()
	g := gate1M(t)
	var all, large, larges, heavy atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan string, 16*40*3)
	for w := range 16 {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(w), 1))
			for range 40 {
				var weight int64
				switch rnd.IntN(4) {
				case 0:
					weight = rnd.Int64N(g.smallMax) + 1 // small: either part
				case 1, 2:
					weight = g.smallMax + 1 + rnd.Int64N(6<<20)
				default:
					weight = 13 << 20 // heavier than the pool
				}
				release := mustAcquire(t, g, weight)
				taken := min(weight, g.largePool)
				isLarge, isHeavy := int64(0), int64(0)
				if weight > g.smallMax {
					isLarge = 1
				}
				if weight > g.largePool {
					isHeavy = 1
				}
				if n := all.Add(taken); n > g.Pool() {
					errs <- "more than the pool held"
				}
				if n := large.Add(taken * isLarge); n > g.largePool {
					errs <- "more than the first-come part held"
				}
				n, h := larges.Add(isLarge), heavy.Add(isHeavy)
				if h > 1 || h == 1 && n > 1 {
					errs <- "a document heavier than the pool not alone"
				}
				time.Sleep(time.Duration(rnd.IntN(300)) * time.Microsecond)
				heavy.Add(-isHeavy)
				larges.Add(-isLarge)
				large.Add(-taken * isLarge)
				all.Add(-taken)
				release()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Everything was given back.
	mustAcquire(t, g, g.largePool)()
	mustAcquire(t, g, g.smallMax)()
}
