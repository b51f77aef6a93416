package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

const bulkWaitDef = "name: waiter\nsteps:\n  - {id: a, type: wait}\n"
const bulkOtherDef = "name: other\nsteps:\n  - {id: a, type: wait}\n"

// bulkFixture starts n instances of waiter (w-0 … w-(n-1)) and two of
// other, on a node whose bulk worker runs only when the test calls it.
func bulkFixture(t *testing.T, b backend, n int) *node {
	t.Helper()
	nd := newNode(t, b, b.newDB(t), nodeOpts{workers: -1, noStart: true})
	nd.define(bulkWaitDef)
	nd.define(bulkOtherDef)
	for i := range n {
		nd.start("waiter", fmt.Sprintf("w-%d", i), "")
	}
	nd.start("other", "o-0", "")
	nd.start("other", "o-1", "")
	return nd
}

// workBulk works the RUNNING bulk operations and returns op as stored.
func (n *node) workBulk(id string) *store.BulkOperation {
	n.t.Helper()
	if err := n.eng.WorkBulk(context.Background()); err != nil {
		n.t.Fatalf("WorkBulk: %v", err)
	}
	op, err := n.eng.GetBulk(context.Background(), id)
	if err != nil {
		n.t.Fatal(err)
	}
	return op
}

func (n *node) createBulk(p engine.BulkParams) *store.BulkOperation {
	n.t.Helper()
	op, err := n.eng.CreateBulk(context.Background(), p)
	if err != nil {
		n.t.Fatalf("CreateBulk(%+v): %v", p, err)
	}
	return op
}

func checkCounts(t *testing.T, op *store.BulkOperation, status string, matched, done, skipped, failed int) {
	t.Helper()
	if op.Status != status || op.Matched != matched || op.Done != done || op.Skipped != skipped || op.Failed != failed {
		t.Errorf("bulk %s: status %s matched %d done %d skipped %d failed %d; want %s %d %d %d %d (errors %v)",
			op.Action, op.Status, op.Matched, op.Done, op.Skipped, op.Failed, status, matched, done, skipped, failed, op.Errors)
	}
	if op.Status != store.BulkRunning && (op.FinishedAt == nil || len(op.Pending) != 0) {
		t.Errorf("finished bulk %s: finished_at %v, pending %v", op.Action, op.FinishedAt, op.Pending)
	}
}

// Each action is applied to the matches, and to nothing else, in batches
// of the list's order, with one version per instance whose cause names
// the operation; an instance the action does not apply to is skipped.
func TestBulkActions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		const n = 450 // three batches
		nd := bulkFixture(t, b, n)
		ctx := context.Background()
		// One match is already finished: cancel does not apply to it.
		if _, err := nd.eng.Action(ctx, "w-7", "cancel"); err != nil {
			t.Fatal(err)
		}
		others := map[string]int64{}
		for _, id := range []string{"o-0", "o-1"} {
			inst, _ := nd.st.Get(ctx, id)
			others[id] = inst.Version
		}

		pause := nd.createBulk(engine.BulkParams{Action: "pause", Filter: store.BulkFilter{Definition: "waiter"}})
		checkCounts(t, nd.workBulk(pause.ID), store.BulkDone, n, n-1, 1, 0)
		resume := nd.createBulk(engine.BulkParams{Action: "resume", Filter: store.BulkFilter{Definition: "waiter", Status: workflow.StatusPaused}})
		checkCounts(t, nd.workBulk(resume.ID), store.BulkDone, n-1, n-1, 0, 0)
		cancel := nd.createBulk(engine.BulkParams{Action: "cancel", Filter: store.BulkFilter{Definition: "waiter"}})
		checkCounts(t, nd.workBulk(cancel.ID), store.BulkDone, n, n-1, 1, 0)

		for i := range n {
			id := fmt.Sprintf("w-%d", i)
			inst, err := nd.st.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if inst.Status != workflow.StatusCancelled {
				t.Fatalf("%s is %s after the bulk cancel", id, inst.Status)
			}
			if i == 7 {
				continue
			}
			h := nd.checkHistory(inst)
			var causes []string
			for _, e := range h[1:] {
				causes = append(causes, e.Cause)
			}
			want := []string{"bulk pause " + pause.ID, "bulk resume " + resume.ID, "bulk cancel " + cancel.ID}
			if strings.Join(causes, "|") != strings.Join(want, "|") {
				t.Fatalf("%s: causes %q, want %q", id, causes, want)
			}
		}
		for id, v := range others {
			if inst, _ := nd.st.Get(ctx, id); inst.Version != v || inst.Status != workflow.StatusRunning {
				t.Errorf("%s, not matched, was written: %s version %d (was %d)", id, inst.Status, inst.Version, v)
			}
		}

		// A limit caps the instances acted on; delete takes finished ones.
		del := nd.createBulk(engine.BulkParams{Action: "delete", Filter: store.BulkFilter{IDPrefix: "w-1"}, Limit: 5})
		checkCounts(t, nd.workBulk(del.ID), store.BulkDone, 5, 5, 0, 0)
		page, err := nd.st.List(ctx, store.ListParams{IDPrefix: "w-", Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Instances) != n-5 {
			t.Errorf("%d instances left after deleting 5 of %d", len(page.Instances), n)
		}
		// A delete of live instances skips them.
		live := nd.createBulk(engine.BulkParams{Action: "delete", Filter: store.BulkFilter{Definition: "other"}})
		checkCounts(t, nd.workBulk(live.ID), store.BulkDone, 2, 0, 2, 0)
	})
}

// An instance that changes between the list and the write is read again
// and checked again: a bulk cancel of RUNNING instances never cancels one
// that another writer paused meanwhile (the write is guarded by the
// version read; without the guard it would write over the pause).
func TestBulkChecksAnInstanceThatMovedAgain(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		nd := bulkFixture(t, b, 5)
		// Another node pauses w-2 between the bulk's check and its write.
		other, err := engine.New(engine.Config{Store: nd.st})
		if err != nil {
			t.Fatal(err)
		}
		var once sync.Once
		engine.SetBulkHook(nd.eng, func(ctx context.Context, id string) {
			if id == "w-2" {
				once.Do(func() {
					if _, err := other.Action(context.Background(), id, "pause"); err != nil {
						t.Errorf("pause meanwhile: %v", err)
					}
				})
			}
		})
		op := nd.createBulk(engine.BulkParams{Action: "cancel", Filter: store.BulkFilter{Definition: "waiter", Status: workflow.StatusRunning}})
		checkCounts(t, nd.workBulk(op.ID), store.BulkDone, 5, 4, 1, 0)
		inst, err := nd.st.Get(context.Background(), "w-2")
		if err != nil {
			t.Fatal(err)
		}
		if inst.Status != workflow.StatusPaused {
			t.Errorf("w-2 is %s; want PAUSED: the bulk cancel wrote over the pause made after its read", inst.Status)
		}
		for _, id := range []string{"w-0", "w-1", "w-3", "w-4"} {
			if inst, _ := nd.st.Get(context.Background(), id); inst.Status != workflow.StatusCancelled {
				t.Errorf("%s is %s, want CANCELLED", id, inst.Status)
			}
		}
	})
}

// A cancelled bulk operation is not worked; cancelling it again returns
// it; a DONE one cannot be cancelled; an unknown one is not found.
func TestBulkCancel(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		nd := bulkFixture(t, b, 3)
		ctx := context.Background()
		op := nd.createBulk(engine.BulkParams{Action: "cancel", Filter: store.BulkFilter{Definition: "waiter"}})
		cancelled, err := nd.eng.CancelBulk(ctx, op.ID)
		if err != nil || cancelled.Status != store.BulkCancelled || cancelled.FinishedAt == nil {
			t.Fatalf("CancelBulk: %+v, %v", cancelled, err)
		}
		checkCounts(t, nd.workBulk(op.ID), store.BulkCancelled, 0, 0, 0, 0)
		if inst, _ := nd.st.Get(ctx, "w-0"); inst.Status != workflow.StatusRunning {
			t.Errorf("w-0 is %s after a cancelled bulk cancel", inst.Status)
		}
		again, err := nd.eng.CancelBulk(ctx, op.ID)
		if err != nil || again.Version != cancelled.Version {
			t.Errorf("CancelBulk again: %+v, %v; want it as it was", again, err)
		}
		done := nd.createBulk(engine.BulkParams{Action: "pause", Filter: store.BulkFilter{Definition: "waiter"}})
		checkCounts(t, nd.workBulk(done.ID), store.BulkDone, 3, 3, 0, 0)
		if _, err := nd.eng.CancelBulk(ctx, done.ID); !errors.Is(err, engine.ErrBulkFinished) {
			t.Errorf("CancelBulk of a DONE one: err = %v, want ErrBulkFinished", err)
		}
		if _, err := nd.eng.CancelBulk(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("CancelBulk of an unknown one: err = %v, want ErrNotFound", err)
		}
	})
}

// A bulk operation refuses what it cannot do before storing anything.
func TestBulkRefused(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		nd := newNode(t, b, b.newDB(t), nodeOpts{workers: -1, noStart: true})
		for _, tc := range []struct {
			p    engine.BulkParams
			want string
		}{
			{engine.BulkParams{Action: "explode", Filter: store.BulkFilter{Definition: "d"}}, `unknown action "explode"`},
			{engine.BulkParams{Action: "cancel"}, "the filter is empty"},
			{engine.BulkParams{Action: "cancel", Filter: store.BulkFilter{Status: "SLEEPING"}}, `filter.status: unknown status "SLEEPING"`},
			{engine.BulkParams{Action: "cancel", Filter: store.BulkFilter{Definition: "d"}, Limit: -1}, "limit must be from 1"},
			{engine.BulkParams{Action: "cancel", Filter: store.BulkFilter{Search: map[string]string{"Bad-Name": "x"}}}, `filter.search: name "Bad-Name"`},
			{engine.BulkParams{Action: "cancel", Filter: store.BulkFilter{IDPrefix: "a b"}}, "filter.id_prefix"},
		} {
			_, err := nd.eng.CreateBulk(context.Background(), tc.p)
			if !errors.Is(err, store.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("CreateBulk(%+v): err = %v, want ErrInvalidArgument containing %q", tc.p, err, tc.want)
			}
		}
		if list, _ := nd.eng.ListBulk(context.Background(), store.ListBulkParams{}); len(list) != 0 {
			t.Errorf("refused operations were stored: %v", list)
		}
	})
}

// deadStore is a node's store that stops answering once dead is set: a
// node that lost its database, or died, between two writes.
type deadStore struct {
	store.Backend
	dead atomic.Bool
}

func (d *deadStore) Apply(ctx context.Context, w *store.Write) (*workflow.Instance, error) {
	if d.dead.Load() {
		return nil, store.ErrUnavailable
	}
	return d.Backend.Apply(ctx, w)
}

func (d *deadStore) PutBulk(ctx context.Context, op *store.BulkOperation, v int64) (*store.BulkOperation, error) {
	if d.dead.Load() {
		return nil, store.ErrUnavailable
	}
	return d.Backend.PutBulk(ctx, op, v)
}

// A node that dies mid-batch leaves the batch in flight; once its lease
// has ended another node does the batch again and finishes the operation,
// and the counts are exact: the instances the first node cancelled count
// as done once (their history names the operation), none is cancelled
// twice.
func TestBulkTakenOverMidBatch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		const n = 300
		addr := b.newDB(t)
		ds := &deadStore{}
		first := newNode(t, b, addr, nodeOpts{workers: -1, noStart: true, lease: 2 * time.Second,
			wrap: func(st store.Backend) store.Backend { ds.Backend = st; return ds }})
		first.define(bulkWaitDef)
		for i := range n {
			first.start("waiter", fmt.Sprintf("w-%d", i), "")
		}
		var acted atomic.Int32
		engine.SetBulkHook(first.eng, func(_ context.Context, id string) {
			if acted.Add(1) == 50 {
				ds.dead.Store(true) // the node dies while it writes its 50th instance
			}
		})
		op := first.createBulk(engine.BulkParams{Action: "cancel", Filter: store.BulkFilter{Definition: "waiter"}})
		if err := first.eng.WorkBulk(context.Background()); !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("WorkBulk of the dying node: %v", err)
		}
		mid, err := store.GetBulk(context.Background(), first.st, op.ID)
		if err != nil {
			t.Fatal(err)
		}
		if mid.Status != store.BulkRunning || len(mid.Pending) == 0 || mid.LeaseOwner == "" || mid.Matched != 0 {
			t.Fatalf("after the first node died: %+v; want RUNNING with a batch in flight", mid)
		}
		second := newNode(t, b, addr, nodeOpts{workers: -1, noStart: true, lease: 2 * time.Second})
		// Not before the first node's lease has ended (checked when the
		// machine was quick enough to look before it did).
		if time.Until(mid.LeaseUntil) > 200*time.Millisecond {
			checkCounts(t, second.workBulk(op.ID), store.BulkRunning, 0, 0, 0, 0)
		}
		time.Sleep(time.Until(mid.LeaseUntil) + 100*time.Millisecond)
		checkCounts(t, second.workBulk(op.ID), store.BulkDone, n, n, 0, 0)
		for i := range n {
			inst, err := second.st.Get(context.Background(), fmt.Sprintf("w-%d", i))
			if err != nil {
				t.Fatal(err)
			}
			h := second.checkHistory(inst)
			if inst.Status != workflow.StatusCancelled || len(h) != 2 {
				t.Fatalf("%s: %s with %d versions; want CANCELLED once", inst.ID, inst.Status, len(h))
			}
		}
	})
}

// A node that stops (its engine shut down) mid-batch hands its lease
// back: another node takes the operation over at once, not after the
// lease (a minute here), and the counts are exact.
func TestBulkHandedBackOnStop(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		const n = 300
		addr := b.newDB(t)
		first := newNode(t, b, addr, nodeOpts{workers: -1, noStart: true, lease: time.Minute})
		first.define(bulkWaitDef)
		for i := range n {
			first.start("waiter", fmt.Sprintf("w-%d", i), "")
		}
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		var acted atomic.Int32
		engine.SetBulkHook(first.eng, func(_ context.Context, id string) {
			if acted.Add(1) == 50 {
				stop()
			}
		})
		op := first.createBulk(engine.BulkParams{Action: "cancel", Filter: store.BulkFilter{Definition: "waiter"}})
		_ = first.eng.WorkBulk(ctx)
		mid, err := store.GetBulk(context.Background(), first.st, op.ID)
		if err != nil {
			t.Fatal(err)
		}
		if mid.Status != store.BulkRunning || time.Until(mid.LeaseUntil) > 0 {
			t.Fatalf("after the first node stopped: %+v; want RUNNING with its lease ended", mid)
		}
		second := newNode(t, b, addr, nodeOpts{workers: -1, noStart: true, lease: time.Minute})
		checkCounts(t, second.workBulk(op.ID), store.BulkDone, n, n, 0, 0)
	})
}

// The bulk worker of a running engine works a new operation at once.
func TestBulkWorkedBySweeper(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		nd := newNode(t, b, b.newDB(t), nodeOpts{workers: -1})
		nd.define(bulkWaitDef)
		for i := range 10 {
			nd.start("waiter", fmt.Sprintf("w-%d", i), "")
		}
		op := nd.createBulk(engine.BulkParams{Action: "cancel", Filter: store.BulkFilter{Definition: "waiter"}})
		deadline := time.Now().Add(10 * time.Second)
		for {
			got, err := nd.eng.GetBulk(context.Background(), op.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status == store.BulkDone {
				checkCounts(t, got, store.BulkDone, 10, 10, 0, 0)
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("bulk still %s after 10s: %+v", got.Status, got)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// A bulk retry takes the FAILED matches back to RUNNING and skips the
// others.
func TestBulkRetry(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		nd := bulkFixture(t, b, 3)
		ctx := context.Background()
		for _, id := range []string{"w-0", "w-2"} {
			if _, err := nd.eng.Transition(ctx, id, workflow.StatusRunning, workflow.StatusFailed); err != nil {
				t.Fatal(err)
			}
		}
		op := nd.createBulk(engine.BulkParams{Action: "retry", Filter: store.BulkFilter{Definition: "waiter"}})
		checkCounts(t, nd.workBulk(op.ID), store.BulkDone, 3, 2, 1, 0)
		for _, id := range []string{"w-0", "w-1", "w-2"} {
			if inst, _ := nd.st.Get(ctx, id); inst.Status != workflow.StatusRunning {
				t.Errorf("%s is %s after the bulk retry", id, inst.Status)
			}
		}
	})
}

// failingApply fails every write of the instances in ids with a plain
// error (not a conflict, not unavailable).
type failingApply struct {
	store.Backend
	ids map[string]bool
}

func (f *failingApply) Apply(ctx context.Context, w *store.Write) (*workflow.Instance, error) {
	if f.ids[w.ID] {
		return nil, fmt.Errorf("disk on fire while writing %s", w.ID)
	}
	return f.Backend.Apply(ctx, w)
}

// A workflow the action fails on is counted failed, with its error kept
// (the first MaxBulkErrors of them), and the operation goes on.
func TestBulkCountsFailures(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		const n = 30
		failing := map[string]bool{}
		for i := range store.MaxBulkErrors + 2 {
			failing[fmt.Sprintf("w-%d", i)] = true
		}
		nd := newNode(t, b, b.newDB(t), nodeOpts{workers: -1, noStart: true,
			wrap: func(st store.Backend) store.Backend { return &failingApply{Backend: st, ids: failing} }})
		nd.define(bulkWaitDef)
		for i := range n {
			nd.start("waiter", fmt.Sprintf("w-%d", i), "")
		}
		op := nd.createBulk(engine.BulkParams{Action: "pause", Filter: store.BulkFilter{Definition: "waiter"}})
		got := nd.workBulk(op.ID)
		checkCounts(t, got, store.BulkDone, n, n-len(failing), 0, len(failing))
		if len(got.Errors) != store.MaxBulkErrors {
			t.Fatalf("%d errors kept, want the first %d: %v", len(got.Errors), store.MaxBulkErrors, got.Errors)
		}
		for _, e := range got.Errors {
			if !failing[e.WorkflowID] || !strings.Contains(e.Error, "disk on fire while writing "+e.WorkflowID) {
				t.Errorf("error %+v", e)
			}
		}
	})
}
