package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

var txTests = []conformanceTest{
	{"WithTx_commit", testWithTxCommit},
	{"WithTx_rollback", testWithTxRollback},
	{"WithTx_rollbackOnOperationError", testWithTxRollbackOnOperationError},
	{"WithTx_isolationLevels", testWithTxIsolationLevels},
	{"WithTx_invalidIsolation", testWithTxInvalidIsolation},
	{"WithTx_operations", testWithTxOperations},
	{"WithTx_writeSkew", testWithTxWriteSkew},
}

func testWithTxCommit(t *testing.T, h Harness) {
	b := setup(t, h)
	p := b.create(t, store.CreateParams{ID: "p", State: counterState(0)})
	err := b.s.WithTx(b.ctx, store.ReadCommitted, func(tx store.Querier) error {
		if _, err := tx.Create(b.ctx, store.CreateParams{ID: "tx-a", Input: json.RawMessage(`{"n":1}`)}); err != nil {
			return err
		}
		_, err := Transition(b.ctx, tx, store.TransitionParams{ID: p.ID, From: workflow.StatusPending, To: workflow.StatusRunning})
		return err
	})
	if err != nil {
		t.Fatalf("WithTx: %v", err)
	}
	a := b.get(t, "tx-a")
	assertJSON(t, "input of tx-a", []byte(`{"n":1}`), a.Input)
	if n := len(b.history(t, "tx-a")); n != 1 {
		t.Errorf("tx-a has %d history rows, want 1", n)
	}
	if got := b.get(t, p.ID); got.Status != workflow.StatusRunning || got.Version != 1 {
		t.Errorf("p after the transaction: status %s, version %d; want RUNNING, 1", got.Status, got.Version)
	}
	if n := len(b.history(t, p.ID)); n != 2 {
		t.Errorf("p has %d history rows, want 2", n)
	}
}

func testWithTxRollback(t *testing.T, h Harness) {
	b := setup(t, h)
	p := b.create(t, store.CreateParams{ID: "p", Status: workflow.StatusRunning, State: stepState()})
	snap := b.snapshot(t, p.ID)
	b.clock.Advance(time.Second)
	err := b.s.WithTx(b.ctx, store.ReadCommitted, func(tx store.Querier) error {
		if _, err := tx.Create(b.ctx, store.CreateParams{ID: "tx-a"}); err != nil {
			return err
		}
		if _, err := Modify(b.ctx, tx, p.ID, func(cur *workflow.Instance) error { return cur.State.SetVar("v", 2) }, "m"); err != nil {
			return err
		}
		if _, err := CompleteStep(b.ctx, tx, StepParams{ID: p.ID, StepID: "a", ExpectedVersion: 1}); err != nil {
			return err
		}
		if _, err := Transition(b.ctx, tx, store.TransitionParams{ID: p.ID, From: workflow.StatusRunning, To: workflow.StatusPaused}); err != nil {
			return err
		}
		return errBoom
	})
	if err != errBoom { //nolint:errorlint // the contract: fn's error comes back unchanged
		t.Errorf("WithTx returned %v (%T), want fn's error unchanged", err, err)
	}
	wantErrorIs(t, "WithTx with a failing fn", err, errBoom)
	_, err = b.s.Get(b.ctx, "tx-a")
	wantErrorIs(t, "Get of an instance created in a rolled-back transaction", err, store.ErrNotFound)
	_, err = b.s.History(b.ctx, "tx-a", 0, 0)
	wantErrorIs(t, "History of an instance created in a rolled-back transaction", err, store.ErrNotFound)
	b.unchanged(t, "a rolled-back transaction", snap)
}

func testWithTxRollbackOnOperationError(t *testing.T, h Harness) {
	b := setup(t, h)
	p := b.create(t, store.CreateParams{ID: "p", State: counterState(0)})
	snap := b.snapshot(t, p.ID)
	err := b.s.WithTx(b.ctx, store.ReadCommitted, func(tx store.Querier) error {
		if _, err := Modify(b.ctx, tx, p.ID, func(cur *workflow.Instance) error { return increment(&cur.State) }, "m"); err != nil {
			return err
		}
		// p is PENDING: this fails with a status mismatch.
		_, err := Transition(b.ctx, tx, store.TransitionParams{ID: p.ID, From: workflow.StatusRunning, To: workflow.StatusPaused})
		return err
	})
	wantMismatch(t, "WithTx returning an operation's error", err, p.ID, workflow.StatusRunning, workflow.StatusPending)
	b.unchanged(t, "a transaction rolled back by an operation's error", snap)
}

func testWithTxIsolationLevels(t *testing.T, h Harness) {
	b := setup(t, h)
	for _, iso := range []store.Isolation{store.ReadCommitted, store.RepeatableRead, store.Serializable} {
		id := "iso-" + fmt.Sprint(int(iso))
		err := b.s.WithTx(b.ctx, iso, func(tx store.Querier) error {
			if _, err := tx.Create(b.ctx, store.CreateParams{ID: id, State: counterState(0)}); err != nil {
				return err
			}
			if _, err := Modify(b.ctx, tx, id, func(cur *workflow.Instance) error { return increment(&cur.State) }, "inc"); err != nil {
				return err
			}
			got, err := tx.Get(b.ctx, id)
			if err != nil {
				return err
			}
			if got.Version != 1 || counter(got.State) != 1 {
				return fmt.Errorf("inside the transaction: version %d, counter %d; want 1, 1", got.Version, counter(got.State))
			}
			return nil
		})
		if err != nil {
			t.Errorf("WithTx(%v): %v", iso, err)
			continue
		}
		if got := b.get(t, id); got.Version != 1 || counter(got.State) != 1 {
			t.Errorf("after WithTx(%v): version %d, counter %d; want 1, 1", iso, got.Version, counter(got.State))
		}
	}
}

func testWithTxInvalidIsolation(t *testing.T, h Harness) {
	b := setup(t, h)
	for _, iso := range []store.Isolation{99, -1, store.Serializable + 1} {
		called := false
		err := b.s.WithTx(b.ctx, iso, func(tx store.Querier) error {
			called = true
			_, err := tx.Create(b.ctx, store.CreateParams{})
			return err
		})
		wantErrorIs(t, fmt.Sprintf("WithTx(Isolation(%d))", int(iso)), err, store.ErrInvalidArgument)
		if called {
			t.Errorf("WithTx(Isolation(%d)) called fn", int(iso))
		}
	}
	b.wantEmpty(t, "WithTx with invalid isolation levels")
}

func testWithTxOperations(t *testing.T, h Harness) {
	b := setup(t, h)
	old := b.createAt(t, clockStart.Add(-time.Hour), store.CreateParams{ID: "old", Status: workflow.StatusRunning}).id
	now := b.clock.Set(clockStart)
	var id string
	err := b.s.WithTx(b.ctx, store.ReadCommitted, func(tx store.Querier) error {
		inst, err := tx.Create(b.ctx, store.CreateParams{State: stepState()})
		if err != nil {
			return fmt.Errorf("tx.Create: %w", err)
		}
		id = inst.ID
		if _, err := store.UpdateState(b.ctx, tx, id, 0, increment, "update"); err != nil {
			return fmt.Errorf("tx.UpdateState: %w", err)
		}
		if _, err := Modify(b.ctx, tx, id, func(cur *workflow.Instance) error { return increment(&cur.State) }, "modify"); err != nil {
			return fmt.Errorf("tx.ModifyState: %w", err)
		}
		if _, err := Transition(b.ctx, tx, store.TransitionParams{ID: id, From: workflow.StatusPending, To: workflow.StatusRunning}); err != nil {
			return fmt.Errorf("tx.TransitionStatus: %w", err)
		}
		if _, err := CompleteStep(b.ctx, tx, StepParams{ID: id, StepID: "a", Output: json.RawMessage(`1`), ExpectedVersion: 3}); err != nil {
			return fmt.Errorf("tx.CompleteStep: %w", err)
		}
		var retries atomic.Int64
		if _, err := store.UpdateWithRetry(b.ctx, tx, id, fastPolicy(&retries), increment, "retry"); err != nil {
			return fmt.Errorf("tx.UpdateWithRetry: %w", err)
		}
		ids, err := Batch(b.ctx, tx, store.BatchStatusParams{Status: workflow.StatusRunning, UpdatedBefore: clockStart.Add(-time.Minute), NewStatus: workflow.StatusPaused, Limit: 10})
		if err != nil {
			return fmt.Errorf("tx.BatchUpdateStatus: %w", err)
		}
		if len(ids) != 1 || ids[0] != old {
			return fmt.Errorf("tx.BatchUpdateStatus = %v, want [%s]", ids, old)
		}
		got, err := tx.Get(b.ctx, id)
		if err != nil {
			return fmt.Errorf("tx.Get: %w", err)
		}
		if got.Version != 5 || counter(got.State) != 3 || got.Status != workflow.StatusRunning {
			return fmt.Errorf("tx.Get inside the transaction: version %d, counter %d, status %s; want 5, 3, RUNNING", got.Version, counter(got.State), got.Status)
		}
		hist, err := tx.History(b.ctx, id, 0, 0)
		if err != nil {
			return fmt.Errorf("tx.History: %w", err)
		}
		if len(hist) != 6 {
			return fmt.Errorf("tx.History inside the transaction has %d rows, want 6", len(hist))
		}
		page, err := tx.List(b.ctx, store.ListParams{})
		if err != nil {
			return fmt.Errorf("tx.List: %w", err)
		}
		if len(page.Instances) != 2 {
			return fmt.Errorf("tx.List inside the transaction: %d instances, want 2", len(page.Instances))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("WithTx: %v", err)
	}
	got := b.get(t, id)
	if got.Version != 5 || counter(got.State) != 3 || got.Status != workflow.StatusRunning {
		t.Errorf("after the transaction: version %d, counter %d, status %s; want 5, 3, RUNNING", got.Version, counter(got.State), got.Status)
	}
	var causes []string
	for i, e := range b.history(t, id) {
		if e.Version != int64(i) {
			t.Errorf("history row %d has version %d", i, e.Version)
		}
		if !e.At.Equal(store.Timestamp(now)) {
			t.Errorf("history version %d at %v, want %v", e.Version, e.At, store.Timestamp(now))
		}
		causes = append(causes, e.Cause)
	}
	want := []string{"create", "update", "modify", "status PENDING→RUNNING", `complete step "a"`, "retry"}
	if fmt.Sprint(causes) != fmt.Sprint(want) {
		t.Errorf("history causes = %q, want %q", causes, want)
	}
	if got := b.get(t, old); got.Status != workflow.StatusPaused || got.Version != 1 {
		t.Errorf("old after the transaction: status %s, version %d; want PAUSED, 1", got.Status, got.Version)
	}
}

// barrier lets n goroutines wait for each other, with a timeout so that one
// failing party cannot hang the test.
type barrier struct {
	arrived sync.WaitGroup
	release chan struct{}
}

func newBarrier(n int) *barrier {
	br := &barrier{release: make(chan struct{})}
	br.arrived.Add(n)
	go func() {
		br.arrived.Wait()
		close(br.release)
	}()
	return br
}

func (br *barrier) wait() error {
	br.arrived.Done()
	select {
	case <-br.release:
		return nil
	case <-time.After(10 * time.Second):
		return errors.New("barrier: the other party never arrived")
	}
}

// skew reads the counters of x and y and writes target's counter = x + y + 1.
// Run serially, two of them (targets x and y) give counters {1, 2}; a write
// skew gives {1, 1}.
func (b *bundle) skew(tx store.Querier, x, y, target string, pause func() error) error {
	ix, err := tx.Get(b.ctx, x)
	if err != nil {
		return err
	}
	iy, err := tx.Get(b.ctx, y)
	if err != nil {
		return err
	}
	if pause != nil {
		if err := pause(); err != nil {
			return err
		}
	}
	cur := ix
	if target == y {
		cur = iy
	}
	st := cur.State.Clone()
	if err := st.SetVar("counter", counter(ix.State)+counter(iy.State)+1); err != nil {
		return err
	}
	_, err = Replace(b.ctx, tx, target, cur.Version, st, "skew")
	return err
}

func testWithTxWriteSkew(t *testing.T, h Harness) {
	b := setup(t, h)
	concurrent := b.s.Capabilities().ConcurrentWriters
	if concurrent {
		x, y := b.create(t, store.CreateParams{ID: "x", State: counterState(0)}).ID, b.create(t, store.CreateParams{ID: "y", State: counterState(0)}).ID
		br := newBarrier(2)
		var errs [2]error
		targets := [2]string{x, y}
		runConcurrently(2, func(i int) {
			errs[i] = b.s.WithTx(b.ctx, store.Serializable, func(tx store.Querier) error {
				return b.skew(tx, x, y, targets[i], br.wait)
			})
		})
		conflicts := 0
		for _, err := range errs {
			if err == nil {
				continue
			}
			var ce *store.ConflictError
			if !errors.As(err, &ce) || !errors.Is(err, store.ErrConflict) {
				t.Errorf("serializable write skew: error %v (%T), want a *store.ConflictError", err, err)
				continue
			}
			conflicts++
			if ce.Reason == "" || ce.Actual != -1 {
				t.Errorf("serialization failure reported as %+v, want a Reason and Actual -1", *ce)
			}
		}
		if conflicts == 0 {
			t.Errorf("two serializable transactions committed a write skew (x=%d, y=%d)", counter(b.get(t, x).State), counter(b.get(t, y).State))
		}
	} else {
		t.Log("the backend serialises writers: the first part (the skew itself) is skipped, WithTxRetry is still checked")
	}

	// WithTxRetry resolves the conflict: the outcome is that of a serial order.
	x, y := b.create(t, store.CreateParams{ID: "x2", State: counterState(0)}).ID, b.create(t, store.CreateParams{ID: "y2", State: counterState(0)}).ID
	br := newBarrier(2)
	var errs [2]error
	var retries atomic.Int64
	targets := [2]string{x, y}
	runConcurrently(2, func(i int) {
		attempts := 0
		errs[i] = store.WithTxRetry(b.ctx, b.s, store.Serializable, fastPolicy(&retries), func(tx store.Querier) error {
			attempts++
			var pause func() error
			if concurrent && attempts == 1 {
				pause = br.wait
			}
			return b.skew(tx, x, y, targets[i], pause)
		})
	})
	for i, err := range errs {
		if err != nil {
			t.Errorf("WithTxRetry writing %s: %v", targets[i], err)
		}
	}
	cx, cy := counter(b.get(t, x).State), counter(b.get(t, y).State)
	if !(cx == 1 && cy == 2 || cx == 2 && cy == 1) {
		t.Errorf("after WithTxRetry: x=%d, y=%d; want {1, 2} (a serial order)", cx, cy)
	}
	if concurrent && retries.Load() == 0 {
		t.Error("WithTxRetry never retried: the skew did not conflict")
	}
}
