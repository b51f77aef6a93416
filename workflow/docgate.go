// The node's bound on the documents its evaluations decode at once.

package workflow

import (
	"context"
	"sync"

	"golang.org/x/sync/semaphore"
)

// Before an expression runs, the document it reads (an instance's input,
// variables and step outputs; a Serverless Workflow's input and runtime)
// is decoded into Go values, which take 4 to 53 times its text
// (DecodedSize). Eight starts at once, each with a 1 MiB input of small
// objects, decoded 8 × 47 MiB. A DocGate shared by every decision of a
// node makes them take turns: a decision takes the estimated weight of its
// document from a pool before decoding it and gives it back when its
// evaluations are done; one whose document weighs more than the pool
// waits for the whole pool (its first-come part, below) and runs alone.
//
// The pool is docPoolFactor × --max-state-bytes: 64 MiB at the default
// 4 MiB. What evaluations may hold at once is then, at the default:
//
//	decoded documents                          64 MiB (the pool)
//	eight evaluations at their held bound     128 MiB (8 × 4 × 4 MiB, ExprBudget)
//	eight 1 MiB request bodies, their copies   16 MiB
//	                                          -------
//	                                          208 MiB
//
// within the 256 MiB a node may take above its idle size, though the
// collector lets the heap grow past what is live before it runs: measured,
// eight starts whose documents fit in the pool together (128 KiB inputs of
// small objects, 6 MiB each decoded) and whose evaluations then hold their
// bound took 178 MiB above idle; eight 1 MiB inputs, 150 to 160 MiB
// (TestBombsKeepTheNodeUp). A 1 MiB input decodes to 47 MiB as small
// objects {"a":1}, 53 MiB at most (with empty keys, the costliest shape
// per byte): about the first-come part of the pool (48 MiB), which such a
// document takes whole: eight decode one after the other, and their
// evaluations run one at a time. Only a state grown past 1 MiB
// by several writes can weigh more than the pool; it then runs alone.
//
// A quarter of the pool is kept for small documents (at most
// smallDocShare of the pool, 256 KiB at the default: the KBs of ordinary
// instances), which take it without waiting in line behind large ones, so
// that ordinary work keeps its latency while large documents take turns.
// The rest is taken first come, first served (so that a large document is
// never passed over for ever); a small document waits there only once the
// small documents in flight fill their quarter.
const (
	docPoolFactor = 16
	smallDocShare = 256 // a small document weighs at most the pool / smallDocShare
)

// DocGate bounds the weight (DecodedSize) of the documents decoded at
// once. A nil *DocGate bounds nothing.
type DocGate struct {
	small, large         *semaphore.Weighted
	smallPool, largePool int64
	smallMax             int64
}

// NewDocGate returns the gate of a node whose states are bounded by
// maxStateBytes (--max-state-bytes; 0 or less: the default 4 MiB).
func NewDocGate(maxStateBytes int) *DocGate {
	n := int64(maxStateBytes)
	if n <= 0 {
		n = defaultExprStateBytes
	}
	pool := docPoolFactor * n
	g := &DocGate{smallPool: pool / 4, smallMax: pool / smallDocShare}
	g.largePool = pool - g.smallPool
	g.small, g.large = semaphore.NewWeighted(g.smallPool), semaphore.NewWeighted(g.largePool)
	return g
}

// Pool returns the weight the gate lets be decoded at once.
func (g *DocGate) Pool() int64 { return g.smallPool + g.largePool }

// Acquire waits until a document of weight bytes (DecodedSize) may be
// decoded, and takes its weight: from the small documents' share when it
// is small and that share has room, else in line for the first-come part,
// all of which a weight larger than that part takes. The returned release
// gives the weight back (calling it again does nothing); it must be
// called once the values decoded are no longer used. A wait ends early,
// with ctx's error, when ctx does, and then takes nothing.
func (g *DocGate) Acquire(ctx context.Context, weight int64) (release func(), err error) {
	if g == nil || weight <= 0 {
		return func() {}, nil
	}
	if weight <= g.smallMax && g.small.TryAcquire(weight) {
		return sync.OnceFunc(func() { g.small.Release(weight) }), nil
	}
	weight = min(weight, g.largePool)
	if err := g.large.Acquire(ctx, weight); err != nil {
		return nil, err
	}
	return sync.OnceFunc(func() { g.large.Release(weight) }), nil
}
