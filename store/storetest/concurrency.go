package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// Definition concurrency limits: every write that makes an instance with a
// concurrency key hold a slot (RUNNING or PAUSED) is checked against the
// key's limit in the store, so the limit holds whoever writes.

var concurrencyTests = []conformanceTest{
	{"Concurrency_guard", testConcurrencyGuard},
	{"Concurrency_pausedHoldsSlot", testConcurrencyPausedHoldsSlot},
	{"Concurrency_queued", testConcurrencyQueued},
	{"Concurrency_retryAndApply", testConcurrencyRetryAndApply},
	{"Concurrency_batchAndGroup", testConcurrencyBatchAndGroup},
	{"Concurrency_concurrentCreates", testConcurrencyConcurrentCreates},
	{"Concurrency_invalid", testConcurrencyInvalid},
	{"Concurrency_oldestHolder", testConcurrencyOldestHolder},
	{"Concurrency_queuedDefinitionInUse", testConcurrencyQueuedDefinitionInUse},
	{"Concurrency_fromGuard", testConcurrencyFromGuard},
}

// A QUEUED instance still needs its definition: it is live.
func testConcurrencyQueuedDefinitionInUse(t *testing.T, h Harness) {
	b := setup(t, h)
	rev, _, err := b.s.PutDefinition(b.ctx, "d", []byte(`{"name":"d","steps":[{"id":"w","type":"wait"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	p := slotted("q", "d", "k", 1, workflow.StatusQueued)
	p.DefinitionRevision = rev
	b.create(t, p)
	wantErrorIs(t, "DeleteDefinition with a QUEUED instance", b.s.DeleteDefinition(b.ctx, "d"), store.ErrDefinitionInUse)
	b.transition(t, "q", workflow.StatusQueued, workflow.StatusCancelled)
	if err := b.s.DeleteDefinition(b.ctx, "d"); err != nil {
		t.Errorf("DeleteDefinition once the QUEUED instance is cancelled: %v", err)
	}
}

// slotted are the create parameters of an instance of definition def with
// concurrency key key and limit limit.
func slotted(id, def, key string, limit int, status workflow.Status) store.CreateParams {
	return store.CreateParams{ID: id, Definition: def, Status: status, Concurrency: &store.ConcurrencySlot{Key: key, Limit: limit}}
}

// wantLimit fails t unless err is the slot guard's refusal.
func wantLimit(t testing.TB, what string, err error) {
	t.Helper()
	var le *store.ConcurrencyLimitError
	if !errors.Is(err, store.ErrConcurrencyLimit) || !errors.As(err, &le) {
		t.Errorf("%s: error = %v (%T), want a *store.ConcurrencyLimitError", what, err, err)
	}
	if errors.Is(err, store.ErrConflict) {
		t.Errorf("%s: a refusal by the limit is not a conflict (writing again changes nothing): %v", what, err)
	}
}

// wantMessage fails t unless err's message has want.
func wantMessage(t testing.TB, what string, err error, want string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("%s: error %v, want one that says %q", what, err, want)
	}
}

// A write's change to its key's counts is decided on the status it moves
// from: a write whose From is not the stored status is refused as a
// conflict (the counts would go wrong) and writes nothing.
func testConcurrencyFromGuard(t *testing.T, h Harness) {
	b := setup(t, h)
	b.create(t, slotted("h", "d", "k", 1, workflow.StatusRunning))
	h1 := b.get(t, "h")
	snap := b.snapshot(t, "h")
	_, err := b.s.Apply(b.ctx, &store.Write{ID: "h", ExpectedVersion: h1.Version, From: workflow.StatusFailed, Status: workflow.StatusRunning,
		State: h1.State, Cause: "wrong from", Now: b.clock.Now()})
	wantErrorIs(t, "Apply from FAILED of a RUNNING instance", err, store.ErrConflict)
	b.unchanged(t, "Apply with a wrong From", snap)
	// The slot is still held, by h alone.
	_, err = b.s.Create(b.ctx, slotted("n", "d", "k", 1, workflow.StatusRunning))
	wantLimit(t, "create while h holds the only slot", err)
}

// wantAbsent fails t unless no instance id is stored.
func (b *bundle) wantAbsent(t testing.TB, what, id string) {
	t.Helper()
	if _, err := b.s.Get(b.ctx, id); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("%s: Get(%q) = %v, want ErrNotFound (nothing written)", what, id, err)
	}
}

func testConcurrencyGuard(t *testing.T, h Harness) {
	b := setup(t, h)
	b.create(t, slotted("a1", "d", "k", 2, workflow.StatusRunning))
	b.create(t, slotted("a2", "d", "k", 2, workflow.StatusRunning))
	_, err := b.s.Create(b.ctx, slotted("a3", "d", "k", 2, workflow.StatusRunning))
	wantLimit(t, "third RUNNING create of a key with limit 2", err)
	wantMessage(t, "third RUNNING create", err, "all 2 slots of concurrency key 'k' of definition d are held")
	b.wantAbsent(t, "refused create", "a3")
	// Other keys, the same key of another definition, and instances that
	// hold no slot are not counted.
	b.create(t, slotted("b1", "d", "other", 2, workflow.StatusRunning))
	b.create(t, slotted("c1", "e", "k", 2, workflow.StatusRunning))
	b.create(t, store.CreateParams{ID: "free", Definition: "d", Status: workflow.StatusRunning})
	// A slot frees when a holder leaves RUNNING for a status that holds none.
	b.transition(t, "a1", workflow.StatusRunning, workflow.StatusCancelled)
	b.create(t, slotted("a3", "d", "k", 2, workflow.StatusRunning))
	_, err = b.s.Create(b.ctx, slotted("a4", "d", "k", 2, workflow.StatusRunning))
	wantLimit(t, "create after the freed slot was taken", err)
}

func testConcurrencyPausedHoldsSlot(t *testing.T, h Harness) {
	b := setup(t, h)
	b.create(t, slotted("p", "d", "k", 1, workflow.StatusRunning))
	b.transition(t, "p", workflow.StatusRunning, workflow.StatusPaused)
	_, err := b.s.Create(b.ctx, slotted("n", "d", "k", 1, workflow.StatusRunning))
	wantLimit(t, "create while the only slot's holder is PAUSED", err)
	// Its resume takes no new slot: it has one.
	b.transition(t, "p", workflow.StatusPaused, workflow.StatusRunning)
	b.transition(t, "p", workflow.StatusRunning, workflow.StatusCompleted)
	b.create(t, slotted("n", "d", "k", 1, workflow.StatusRunning))
}

func testConcurrencyQueued(t *testing.T, h Harness) {
	b := setup(t, h)
	b.create(t, slotted("r1", "d", "k", 2, workflow.StatusRunning))
	b.create(t, slotted("r2", "d", "k", 2, workflow.StatusRunning))
	// QUEUED holds no slot: created whatever the count.
	for i := range 3 {
		b.create(t, slotted(fmt.Sprintf("q%d", i), "d", "k", 2, workflow.StatusQueued))
		b.clock.Advance(time.Millisecond)
	}
	b.create(t, slotted("other", "d", "k2", 2, workflow.StatusQueued))
	due := func(what string, p store.DueParams, want ...string) {
		t.Helper()
		got, err := b.queuedDue(p)
		if err != nil {
			t.Fatalf("%s: Due(queued): %v", what, err)
		}
		ids := []string{}
		for _, inst := range got {
			if inst.Status != workflow.StatusQueued {
				t.Errorf("%s: %s is %s", what, inst.ID, inst.Status)
			}
			ids = append(ids, inst.ID)
		}
		if !slices.Equal(ids, want) {
			t.Errorf("%s: Due(queued) = %v, want %v", what, ids, want)
		}
	}
	all := store.DueParams{Kind: store.DueQueued, Limit: 100}
	one := store.DueParams{Kind: store.DueQueued, Definition: "d", Key: "k", Limit: 100}
	due("no free slot of k", one)
	due("every key", all, "other")
	b.transition(t, "r1", workflow.StatusRunning, workflow.StatusCompleted)
	// A slot is free, but a new instance does not pass the queue.
	_, err := b.s.Create(b.ctx, slotted("jump", "d", "k", 2, workflow.StatusRunning))
	wantLimit(t, "RUNNING create while older instances wait QUEUED", err)
	wantMessage(t, "queue jump", err, "instances of concurrency key 'k' of definition d wait QUEUED")
	b.wantAbsent(t, "queue jump", "jump")
	due("one free slot: the oldest", one, "q0")
	b.transition(t, "r2", workflow.StatusRunning, workflow.StatusFailed)
	due("two free slots: the two oldest", one, "q0", "q1")
	due("limit 1", store.DueParams{Kind: store.DueQueued, Definition: "d", Key: "k", Limit: 1}, "q0")
	// Promotion is a write like any other: guarded.
	b.transition(t, "q0", workflow.StatusQueued, workflow.StatusRunning)
	b.transition(t, "q1", workflow.StatusQueued, workflow.StatusRunning)
	snap := b.snapshot(t, "q2")
	_, err = Transition(b.ctx, b.s, store.TransitionParams{ID: "q2", From: workflow.StatusQueued, To: workflow.StatusRunning})
	wantLimit(t, "promotion over the limit", err)
	wantMessage(t, "promotion over the limit", err, "all 2 slots of concurrency key 'k' of definition d are held")
	b.unchanged(t, "refused promotion", snap)
	due("full again", one)
	// A QUEUED instance can be cancelled.
	b.transition(t, "q2", workflow.StatusQueued, workflow.StatusCancelled)
	due("nothing queued of k", one)
}

func testConcurrencyRetryAndApply(t *testing.T, h Harness) {
	b := setup(t, h)
	b.create(t, slotted("f", "d", "k", 1, workflow.StatusRunning))
	b.transition(t, "f", workflow.StatusRunning, workflow.StatusFailed)
	b.create(t, slotted("r", "d", "k", 1, workflow.StatusRunning))
	snap := b.snapshot(t, "f")
	_, err := Transition(b.ctx, b.s, store.TransitionParams{ID: "f", From: workflow.StatusFailed, To: workflow.StatusRunning})
	wantLimit(t, "retry (FAILED → RUNNING) over the limit", err)
	b.unchanged(t, "refused retry", snap)
	f := b.get(t, "f")
	_, err = b.s.Apply(b.ctx, &store.Write{ID: "f", ExpectedVersion: f.Version, From: f.Status, Status: workflow.StatusRunning,
		State: f.State, Cause: "retry", Now: b.clock.Now()})
	wantLimit(t, "Apply of a retry over the limit", err)
	b.unchanged(t, "refused Apply", snap)
	_, err = Modify(b.ctx, b.s, "f", func(i *workflow.Instance) error { i.Status = workflow.StatusRunning; return nil }, "retry")
	wantLimit(t, "ModifyState of a retry over the limit", err)
	b.unchanged(t, "refused ModifyState", snap)
	b.transition(t, "r", workflow.StatusRunning, workflow.StatusTimedOut)
	if _, err := b.s.Apply(b.ctx, &store.Write{ID: "f", ExpectedVersion: f.Version, From: f.Status, Status: workflow.StatusRunning,
		State: f.State, Cause: "retry", Now: b.clock.Now()}); err != nil {
		t.Fatalf("Apply of a retry with a free slot: %v", err)
	}
}

func testConcurrencyBatchAndGroup(t *testing.T, h Harness) {
	b := setup(t, h)
	for i := range 3 {
		b.create(t, slotted(fmt.Sprintf("q%d", i), "d", "k", 2, workflow.StatusQueued))
	}
	// One statement that would move three into two slots moves none.
	_, err := Batch(b.ctx, b.s, store.BatchStatusParams{Status: workflow.StatusQueued, NewStatus: workflow.StatusRunning,
		UpdatedBefore: b.clock.Now().Add(time.Hour), Limit: 10, Cause: "batch"})
	wantLimit(t, "batch of three into two slots", err)
	for i := range 3 {
		if st := b.get(t, fmt.Sprintf("q%d", i)).Status; st != workflow.StatusQueued {
			t.Errorf("q%d is %s after the refused batch", i, st)
		}
	}
	ids, err := Batch(b.ctx, b.s, store.BatchStatusParams{Status: workflow.StatusQueued, NewStatus: workflow.StatusRunning,
		UpdatedBefore: b.clock.Now().Add(time.Hour), Limit: 2, Cause: "batch"})
	if err != nil || len(ids) != 2 {
		t.Fatalf("batch of two into two slots = %v, %v", ids, err)
	}
	// A group with a create over the limit writes nothing of the group.
	eq := b.engine(t)
	_, _, err = eq.ApplyGroup(b.ctx, []store.CreateParams{
		{ID: "free", Definition: "d", Status: workflow.StatusRunning},
		slotted("over", "e", "k", 1, workflow.StatusRunning),
		slotted("over2", "e", "k", 1, workflow.StatusRunning),
	}, nil, nil)
	wantLimit(t, "group with two creates for one slot", err)
	b.wantAbsent(t, "group member", "free")
	b.wantAbsent(t, "group member", "over")
}

func testConcurrencyConcurrentCreates(t *testing.T, h Harness) {
	b := setup(t, h)
	const writers, limit = 16, 3
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for i := range writers {
		wg.Go(func() {
			_, errs[i] = b.s.Create(b.ctx, slotted(fmt.Sprintf("w%02d", i), "d", "k", limit, workflow.StatusRunning))
		})
	}
	wg.Wait()
	ok := 0
	for i, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, store.ErrConcurrencyLimit):
		default:
			t.Errorf("create w%02d: %v", i, err)
		}
	}
	if ok != limit {
		t.Errorf("%d concurrent creates for %d slots: %d created, want exactly %d", writers, limit, ok, limit)
	}
	page, err := b.s.List(b.ctx, store.ListParams{Status: workflow.StatusRunning, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Instances) != limit {
		t.Errorf("%d RUNNING instances stored, want %d", len(page.Instances), limit)
	}
}

func testConcurrencyInvalid(t *testing.T, h Harness) {
	b := setup(t, h)
	_, err := b.s.Create(b.ctx, slotted("z", "d", "k", 0, workflow.StatusRunning))
	wantErrorIs(t, "limit 0", err, store.ErrInvalidArgument)
	_, err = b.s.Create(b.ctx, slotted("z", "", "k", 1, workflow.StatusRunning))
	wantErrorIs(t, "a key without a definition", err, store.ErrInvalidArgument)
	b.wantAbsent(t, "invalid creates", "z")
	for _, limit := range []int{0, store.MaxBatchLimit + 1} {
		_, err = b.queuedDue(store.DueParams{Kind: store.DueQueued, Limit: limit})
		wantErrorIs(t, fmt.Sprintf("Due(queued) limit %d", limit), err, store.ErrInvalidArgument)
	}
}

func testConcurrencyOldestHolder(t *testing.T, h Harness) {
	b := setup(t, h)
	if _, err := b.oldestHolder("d", "k"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Due(holder) of an empty key: %v, want ErrNotFound", err)
	}
	b.create(t, slotted("old", "d", "k", 5, workflow.StatusRunning))
	b.clock.Advance(time.Millisecond)
	b.create(t, slotted("new", "d", "k", 5, workflow.StatusRunning))
	b.create(t, slotted("otherdef", "e", "k", 5, workflow.StatusRunning))
	got, err := b.oldestHolder("d", "k")
	if err != nil || got.ID != "old" {
		t.Fatalf("Due(holder) = %v, %v; want old", got, err)
	}
	b.transition(t, "old", workflow.StatusRunning, workflow.StatusPaused)
	if got, err = b.oldestHolder("d", "k"); err != nil || got.ID != "new" {
		t.Errorf("Due(holder) with the oldest PAUSED = %v, %v; want new (only RUNNING ones are cancelled to make room)", got, err)
	}
}
