package engine_test

// The hot path's round trips: a completion whose instance moved on after
// its claim, a start that does not read the latest revision.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/store/storetest"
	"github.com/flowd/flowd/workflow"
)

// moveOnClaim changes the instance of the first task a claim leases once
// the claim is made and before the task's completion, as a concurrent
// writer would.
type moveOnClaim struct {
	store.Backend
	once   sync.Once
	err    error
	claims atomic.Int64 // claims that leased a task
}

func (s *moveOnClaim) ClaimTasks(ctx context.Context, p store.ClaimParams) ([]store.Claimable, store.HeldBack, error) {
	claimed, held, err := s.Backend.ClaimTasks(ctx, p)
	if len(claimed) > 0 {
		s.claims.Add(1)
		s.once.Do(func() {
			_, s.err = storetest.Modify(ctx, s.Backend, claimed[0].Task.InstanceID, func(inst *workflow.Instance) error {
				return inst.State.SetVar("moved", true)
			}, "moved on")
		})
	}
	return claimed, held, err
}

// A claim writes no version: an instance that moves on between the claim
// and the completion costs the completion a fresh read (its write, decided
// on the instance as claimed, conflicts), not a second claim. The step
// runs once, its attempt is counted once, and the other writer's change
// is kept.
func TestCompletionOfAnInstanceThatMovedOnAfterTheClaim(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		var runs atomic.Int64
		count := func(ctx context.Context, task engine.Task) (json.RawMessage, error) {
			runs.Add(1)
			return json.RawMessage(fmt.Sprintf(`{"attempt":%d}`, task.Attempt)), nil
		}
		ms := &moveOnClaim{}
		n := newNode(t, b, b.newDB(t), nodeOpts{workers: 1, handlers: map[string]engine.Handler{"count": count},
			wrap: func(st store.Backend) store.Backend { ms.Backend = st; return ms }})
		n.define("name: one\nsteps:\n  - {id: a, type: task, handler: count}\n")
		inst := n.start("one", "", `{}`)
		done := n.waitStatus(inst.ID, workflow.StatusCompleted, 10*time.Second)
		if ms.err != nil {
			t.Fatalf("the concurrent write: %v", ms.err)
		}
		if got := output(t, done, "a"); got != `{"attempt":1}` || runs.Load() != 1 || done.State.Steps["a"].Attempts != 1 {
			t.Errorf("step a: output %s, %d runs, attempts %d; want attempt 1, 1 run, 1 attempt", got, runs.Load(), done.State.Steps["a"].Attempts)
		}
		if string(done.State.Variables["moved"]) != "true" {
			t.Errorf("the concurrent writer's variable was lost: %s", done.State.Variables)
		}
		if ms.claims.Load() != 1 {
			t.Errorf("%d claims leased the task, want 1", ms.claims.Load())
		}
		hist, err := n.st.History(context.Background(), inst.ID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		var causes []string
		for _, h := range hist {
			causes = append(causes, h.Cause)
		}
		want := []string{"start", "moved on", `step "a" completed (attempt 1)`}
		if strings.Join(causes, "|") != strings.Join(want, "|") {
			t.Errorf("history causes %q, want %q", causes, want)
		}
		n.checkHistory(done)
	})
}

// defReads counts the reads of a definition's latest revision.
type defReads struct {
	store.Backend
	latest atomic.Int64
}

func (s *defReads) ListDefinitions(ctx context.Context, p store.ListDefinitionsParams) ([]*store.DefinitionRecord, error) {
	if p.Name != "" && p.Revision == 0 {
		s.latest.Add(1)
	}
	return s.Backend.ListDefinitions(ctx, p)
}

// A start uses the latest revision the node knows without reading it, and
// still starts a revision that another node stored since.
func TestStartUsesTheLatestRevisionWithoutReadingIt(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		dr := &defReads{}
		addr := b.newDB(t)
		n := newNode(t, b, addr, nodeOpts{workers: -1, wrap: func(st store.Backend) store.Backend { dr.Backend = st; return dr }})
		n.define("name: d\nsteps:\n  - {id: a, type: wait}\n")
		for i := range 3 {
			if inst := n.start("d", "", `{}`); inst.DefinitionRevision != 1 {
				t.Errorf("start %d: revision %d, want 1", i+1, inst.DefinitionRevision)
			}
		}
		if got := dr.latest.Load(); got != 0 {
			t.Errorf("three starts after this node stored the definition read its latest revision %d times, want none", got)
		}
		// Another node stores revision 2 (as the engine would: canonical).
		def, err := workflow.ParseDefinition([]byte("name: d\nsteps:\n  - {id: b, type: wait}\n"))
		if err != nil {
			t.Fatal(err)
		}
		canon, err := def.Canonical()
		if err != nil {
			t.Fatal(err)
		}
		if rev, _, err := n.st.PutDefinition(context.Background(), "d", canon); err != nil || rev != 2 {
			t.Fatalf("PutDefinition on the other node = %d, %v; want revision 2", rev, err)
		}
		for i := range 2 {
			inst := n.start("d", "", `{}`)
			if inst.DefinitionRevision != 2 || inst.State.Steps["b"] == nil {
				t.Errorf("start %d after revision 2: revision %d, steps %v; want revision 2 with step b", i+1, inst.DefinitionRevision, inst.State.Steps)
			}
		}
		if got := dr.latest.Load(); got != 1 {
			t.Errorf("the latest revision was read %d times in all, want once (after the refused start)", got)
		}
		// A node that has not stored the definition reads it once.
		dr2 := &defReads{}
		other := newNode(t, b, addr, nodeOpts{workers: -1, wrap: func(st store.Backend) store.Backend { dr2.Backend = st; return dr2 }})
		for range 2 {
			if inst := other.start("d", "", `{}`); inst.DefinitionRevision != 2 {
				t.Errorf("start on a second node: revision %d, want 2", inst.DefinitionRevision)
			}
		}
		if got := dr2.latest.Load(); got != 1 {
			t.Errorf("two starts on a second node read the latest revision %d times, want once", got)
		}
		// An explicit revision is still honoured.
		inst, err := n.eng.StartWorkflow(context.Background(), engine.StartParams{Definition: "d", Revision: 1})
		if err != nil || inst.DefinitionRevision != 1 {
			t.Errorf("start of revision 1 = %v, %v", inst, err)
		}
	})
}

// lostClaimAnswer makes the claims that wrote something fail after they
// committed, as a connection lost before the answer arrived would.
type lostClaimAnswer struct {
	store.Backend
	lost atomic.Int64
}

func (s *lostClaimAnswer) ClaimTasks(ctx context.Context, p store.ClaimParams) ([]store.Claimable, store.HeldBack, error) {
	claimed, held, err := s.Backend.ClaimTasks(ctx, p)
	if err == nil && len(claimed) > 0 {
		s.lost.Add(1)
		return claimed, store.HeldBack{}, fmt.Errorf("%w: connection lost after COMMIT", store.ErrOutcomeUnknown)
	}
	return claimed, held, err
}

// A claim whose writes landed but whose answer was lost still runs its
// tasks at once, not after their leases end.
func TestClaimWithLostAnswer(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		var runs atomic.Int64
		count := func(ctx context.Context, task engine.Task) (json.RawMessage, error) {
			runs.Add(1)
			return json.RawMessage(fmt.Sprintf(`{"attempt":%d}`, task.Attempt)), nil
		}
		ls := &lostClaimAnswer{}
		n := newNode(t, b, b.newDB(t), nodeOpts{workers: 1, lease: time.Minute, handlers: map[string]engine.Handler{"count": count},
			wrap: func(st store.Backend) store.Backend { ls.Backend = st; return ls }})
		n.define("name: one\nsteps:\n  - {id: a, type: task, handler: count, retry: {max_attempts: 1}}\n")
		inst := n.start("one", "", `{}`)
		done := n.waitStatus(inst.ID, workflow.StatusCompleted, 10*time.Second)
		if got := output(t, done, "a"); got != `{"attempt":1}` || runs.Load() != 1 || ls.lost.Load() != 1 {
			t.Errorf("step a: output %s, %d runs, %d lost answers; want attempt 1, 1 run, 1 lost answer", got, runs.Load(), ls.lost.Load())
		}
		n.checkHistory(done)
	})
}

// busyCreate refuses every Create with a conflict that is not a stale
// revision (a lock timeout, a deadlock).
type busyCreate struct {
	store.Backend
	creates atomic.Int64
}

func (s *busyCreate) Create(ctx context.Context, p store.CreateParams) (*workflow.Instance, error) {
	s.creates.Add(1)
	return nil, &store.ConflictError{ID: p.ID, Actual: -1, Reason: "database is locked"}
}

// A start retries only for a newer revision, not for any conflict.
func TestStartDoesNotRetryOtherConflicts(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		bc := &busyCreate{}
		n := newNode(t, b, b.newDB(t), nodeOpts{workers: -1, wrap: func(st store.Backend) store.Backend { bc.Backend = st; return bc }})
		n.define("name: d\nsteps:\n  - {id: a, type: wait}\n")
		_, err := n.eng.StartWorkflow(context.Background(), engine.StartParams{Definition: "d"})
		if !errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrStaleRevision) || bc.creates.Load() != 1 {
			t.Errorf("start = %v after %d Create calls; want the conflict after one", err, bc.creates.Load())
		}
	})
}

// claimCounter counts the claims of their own a node makes (ClaimTasks),
// and the tasks leased by them and by the claims of group commits.
type claimCounter struct {
	store.Backend
	claims, own, inGroup atomic.Int64
}

func (s *claimCounter) ClaimTasks(ctx context.Context, p store.ClaimParams) ([]store.Claimable, store.HeldBack, error) {
	s.claims.Add(1)
	claimed, held, err := s.Backend.ClaimTasks(ctx, p)
	if err == nil {
		s.own.Add(int64(len(claimed)))
	}
	return claimed, held, err
}

func (s *claimCounter) ApplyGroup(ctx context.Context, creates []store.CreateParams, ws []*store.Write, claim *store.GroupClaim) ([]*workflow.Instance, []*workflow.Instance, error) {
	created, written, err := s.Backend.ApplyGroup(ctx, creates, ws, claim)
	if err == nil && claim != nil {
		s.inGroup.Add(int64(len(claim.Claimed)))
	}
	return created, written, err
}

// gatedEcho is echo that reports each workflow whose step a it runs on
// running and then waits for release to be closed.
func gatedEcho() (engine.Handler, <-chan string, chan struct{}) {
	running, release := make(chan string, 4), make(chan struct{})
	return func(ctx context.Context, task engine.Task) (json.RawMessage, error) {
		if task.Step == "a" {
			running <- task.WorkflowID
			<-release
		}
		return echo(ctx, task)
	}, running, release
}

// twoChainsOnOneWorker runs two chains on a node with one worker (o with
// gatedEcho as echo): the second starts while the first's step a runs, so
// its first task waits in the queue until the first chain's last step
// completes. Both must complete as a chain does.
func twoChainsOnOneWorker(t *testing.T, b backend, o nodeOpts) {
	t.Helper()
	gate, running, release := gatedEcho()
	o.workers, o.handlers = 1, map[string]engine.Handler{"echo": gate}
	n := newNode(t, b, b.newDB(t), o)
	n.define(chainDef)
	first := n.start("chain", "", `{"n": 1, "id": "x"}`)
	if id := <-running; id != first.ID {
		t.Fatalf("running %s, want %s", id, first.ID)
	}
	second := n.start("chain", "", `{"n": 2, "id": "y"}`)
	close(release)
	if id := <-running; id != second.ID {
		t.Fatalf("running %s, want %s", id, second.ID)
	}
	for i, inst := range []*workflow.Instance{first, second} {
		done := n.waitStatus(inst.ID, workflow.StatusCompleted, 10*time.Second)
		checkChainRun(t, n, done, i+1)
	}
}

// A worker whose completion ends its workflow gets the next queued task
// with that completion's commit, delivered as a claim delivers it, instead
// of claiming it in a transaction of its own.
func TestFreedWorkerClaimsWithItsCompletion(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		cc := &claimCounter{}
		twoChainsOnOneWorker(t, b, nodeOpts{wrap: func(st store.Backend) store.Backend { cc.Backend = st; return cc }})
		settle(func() bool { return cc.own.Load()+cc.inGroup.Load() >= 2 })
		if cc.own.Load() != 1 || cc.inGroup.Load() != 1 {
			t.Errorf("tasks leased by claims of their own: %d, by group commits: %d; want 1 (the first workflow's first step) and 1 (the second's)",
				cc.own.Load(), cc.inGroup.Load())
		}
	})
}

// A group commit whose claim leased the next workflow's first task and
// whose answer was lost: the worker runs that task at once (its completion
// conflicted with itself when written again), instead of leaving it leased
// to nobody until its lease ends and counting an attempt that never ran.
func TestGroupClaimWithLostAnswer(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ls := &lostAckStore{}
		// The lease outlives the test: only the hand-over can run the
		// second workflow in time.
		twoChainsOnOneWorker(t, b, nodeOpts{lease: time.Minute, wrap: func(st store.Backend) store.Backend { ls.Backend = st; return ls }})
	})
}
