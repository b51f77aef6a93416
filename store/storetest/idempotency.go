package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

var idempotencyTests = []conformanceTest{
	{"IdempotencyKey_repeat", testIdempotencyKeyRepeat},
	{"IdempotencyKey_concurrent", testIdempotencyKeyConcurrent},
	{"IdempotencyKey_expires", testIdempotencyKeyExpires},
	{"IdempotencyKey_idTaken", testIdempotencyKeyIDTaken},
	{"IdempotencyKey_staleRevision", testIdempotencyKeyStaleRevision},
	{"IdempotencyKey_group", testIdempotencyKeyGroup},
	{"IdempotencyKey_invalid", testIdempotencyKeyInvalid},
	{"IdempotencyKey_deleteBefore", testIdempotencyKeyDeleteBefore},
}

// wantKeyUsed fails t unless err is an *IdempotencyKeyError naming owner.
func wantKeyUsed(t testing.TB, what string, err error, owner string, same bool) {
	t.Helper()
	var ke *store.IdempotencyKeyError
	if !errors.As(err, &ke) || !errors.Is(err, store.ErrIdempotencyKeyUsed) {
		t.Errorf("%s: error = %v, want an *IdempotencyKeyError", what, err)
		return
	}
	if ke.WorkflowID != owner || ke.SameRequest != same {
		t.Errorf("%s: %+v, want workflow %s, same request %v", what, ke, owner, same)
	}
}

// keyed is a create of a free-form instance with key and request hash.
func keyed(key, hash string) store.CreateParams {
	return store.CreateParams{IdempotencyKey: key, RequestHash: hash, State: stepState()}
}

// A repeat with the key creates nothing and names the first instance; a
// different hash says so; another key creates.
func testIdempotencyKeyRepeat(t *testing.T, h Harness) {
	b := setup(t, h)
	first := b.create(t, keyed("order-17", "h1"))
	b.clock.Advance(time.Hour)
	inst, err := b.s.Create(b.ctx, keyed("order-17", "h1"))
	wantKeyUsed(t, "repeat", err, first.ID, true)
	wantNilInstance(t, "repeat", inst)
	_, err = b.s.Create(b.ctx, keyed("order-17", "h2"))
	wantKeyUsed(t, "repeat with another request", err, first.ID, false)
	// The same client id with the key is a repeat too, not ErrExists.
	_, err = b.s.Create(b.ctx, store.CreateParams{ID: first.ID, IdempotencyKey: "order-17", RequestHash: "h1"})
	wantKeyUsed(t, "repeat with the first instance's id", err, first.ID, true)
	if n := b.countAll(t); n != 1 {
		t.Fatalf("%d instances after repeats, want 1", n)
	}
	other := b.create(t, keyed("order-18", "h1"))
	if other.ID == first.ID {
		t.Errorf("another key returned the first instance")
	}
	// Without a key nothing is checked.
	b.create(t, store.CreateParams{})
	if n := b.countAll(t); n != 3 {
		t.Errorf("%d instances, want 3", n)
	}
}

// Of concurrent creates with one key, exactly one creates; the others
// learn its id.
func testIdempotencyKeyConcurrent(t *testing.T, h Harness) {
	b := setup(t, h)
	const n = 8
	var wg sync.WaitGroup
	insts := make([]*workflow.Instance, n)
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			insts[i], errs[i] = b.s.Create(b.ctx, keyed("same", "h"))
		})
	}
	close(start)
	wg.Wait()
	var winner string
	for i := range n {
		if errs[i] == nil {
			if winner != "" {
				t.Fatalf("two creates with one key succeeded: %s and %s", winner, insts[i].ID)
			}
			winner = insts[i].ID
		}
	}
	if winner == "" {
		t.Fatalf("no create succeeded: %v", errs)
	}
	for i := range n {
		if errs[i] != nil {
			wantKeyUsed(t, fmt.Sprintf("create %d", i), errs[i], winner, true)
		}
	}
	if c := b.countAll(t); c != 1 {
		t.Errorf("%d instances, want 1", c)
	}
}

// A key stands for IdempotencyKeyTTL; then it is free and names the new
// instance.
func testIdempotencyKeyExpires(t *testing.T, h Harness) {
	b := setup(t, h)
	first := b.create(t, keyed("k", "h1"))
	b.clock.Advance(store.IdempotencyKeyTTL - time.Microsecond)
	_, err := b.s.Create(b.ctx, keyed("k", "h2"))
	wantKeyUsed(t, "just before the end of the TTL", err, first.ID, false)
	b.clock.Advance(2 * time.Microsecond)
	second := b.create(t, keyed("k", "h2"))
	_, err = b.s.Create(b.ctx, keyed("k", "h2"))
	wantKeyUsed(t, "after the renewal", err, second.ID, true)
}

// A keyed create whose id is taken records no key.
func testIdempotencyKeyIDTaken(t *testing.T, h Harness) {
	b := setup(t, h)
	b.create(t, store.CreateParams{ID: "taken"})
	_, err := b.s.Create(b.ctx, store.CreateParams{ID: "taken", IdempotencyKey: "k", RequestHash: "h"})
	wantErrorIs(t, "keyed create of a taken id", err, store.ErrExists)
	inst := b.create(t, store.CreateParams{ID: "free", IdempotencyKey: "k", RequestHash: "h"})
	if inst.ID != "free" {
		t.Errorf("created %s", inst.ID)
	}
}

// A keyed create refused for a newer revision records no key.
func testIdempotencyKeyStaleRevision(t *testing.T, h Harness) {
	b := setup(t, h)
	d := b.defs(t)
	b.putDefinition(t, d, "d", `{"v":1}`, 1, true)
	b.putDefinition(t, d, "d", `{"v":2}`, 2, true)
	p := keyed("k", "h")
	p.Definition, p.DefinitionRevision, p.LatestRevision = "d", 1, true
	_, err := b.s.Create(b.ctx, p)
	wantErrorIs(t, "keyed create of a stale revision", err, store.ErrStaleRevision)
	p.DefinitionRevision = 2
	b.create(t, p)
}

// In a group, a keyed create records its key, and a live key fails the
// group as any create that would not happen does.
func testIdempotencyKeyGroup(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	b.putDefinition(t, b.defs(t), "d", `{"v":1}`, 1, true)
	now := b.clock.Now()
	p1, _ := groupStart("g1", now)
	p1.IdempotencyKey, p1.RequestHash = "k1", "h"
	if _, _, err := eq.ApplyGroup(b.ctx, []store.CreateParams{p1}, nil, nil); err != nil {
		t.Fatalf("ApplyGroup: %v", err)
	}
	_, err := b.s.Create(b.ctx, keyed("k1", "h"))
	wantKeyUsed(t, "create with the group's key", err, "g1", true)

	p2, _ := groupStart("g2", now)
	p3, _ := groupStart("g3", now)
	p3.IdempotencyKey, p3.RequestHash = "k1", "h"
	_, _, err = eq.ApplyGroup(b.ctx, []store.CreateParams{p2, p3}, nil, nil)
	if !errors.Is(err, store.ErrIdempotencyKeyUsed) && !errors.Is(err, store.ErrConflict) {
		t.Errorf("ApplyGroup with a used key: %v, want ErrIdempotencyKeyUsed or ErrConflict", err)
	}
	if n := b.countAll(t); n != 1 {
		t.Errorf("%d instances after the failed group, want 1", n)
	}
}

func testIdempotencyKeyInvalid(t *testing.T, h Harness) {
	b := setup(t, h)
	for _, p := range []store.CreateParams{
		keyed(strings.Repeat("k", store.MaxIdempotencyKeyLength+1), "h"),
		keyed("line\nbreak", "h"),
		keyed("é", "h"),
		keyed("k", ""),
		{RequestHash: "h"},
	} {
		_, err := b.s.Create(b.ctx, p)
		wantErrorIs(t, fmt.Sprintf("Create with key %q hash %q", p.IdempotencyKey, p.RequestHash), err, store.ErrInvalidArgument)
	}
	b.create(t, keyed(strings.Repeat("~", store.MaxIdempotencyKeyLength), "h"))
	b.create(t, keyed(" spaced key ", "h"))
	if n := b.countAll(t); n != 2 {
		t.Errorf("%d instances, want the 2 valid ones", n)
	}
}

// The sweeper's delete: oldest first, at most limit, only before t.
func testIdempotencyKeyDeleteBefore(t *testing.T, h Harness) {
	b := setup(t, h)
	var old []*workflow.Instance
	for i := range 3 {
		old = append(old, b.create(t, keyed(fmt.Sprintf("old%d", i), "h")))
		b.clock.Advance(time.Second)
	}
	cut := b.clock.Advance(time.Minute)
	young := b.create(t, keyed("young", "h"))
	if _, err := b.prune(store.PruneIdempotencyKeys, cut, 0); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("limit 0: %v, want ErrInvalidArgument", err)
	}
	for _, want := range []int{2, 1, 0} {
		n, err := b.prune(store.PruneIdempotencyKeys, cut, 2)
		if err != nil || n != want {
			t.Fatalf("Prune(idempotency keys) = %d, %v; want %d", n, err, want)
		}
	}
	_, err := b.s.Create(b.ctx, keyed("young", "h"))
	wantKeyUsed(t, "the young key", err, young.ID, true)
	for i, inst := range old {
		again := b.create(t, keyed(fmt.Sprintf("old%d", i), "h"))
		if again.ID == inst.ID {
			t.Errorf("a deleted key still names %s", inst.ID)
		}
	}
}
