package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// settle waits (up to 5 s) until done reports true: a workflow is COMPLETED
// as soon as its last write commits, a moment before the store wrapper that
// made the write has counted it.
func settle(done func() bool) {
	for deadline := time.Now().Add(5 * time.Second); !done() && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
}

// completedTask is the task w completes as a lease holder (DONE, guarded
// by the row read under its lease), or "".
func completedTask(w *store.Write) string {
	if len(w.Update) == 1 && w.Update[0].Guard.Lease != "" && w.Update[0].Task.Status == store.TaskDone {
		return w.Update[0].Task.ID
	}
	return ""
}

// readTracking tells the engine's two ways of completing a task apart when
// both reach Apply: the fallback (leaseHolderOp) reads the task and its
// instance and then writes, the one-statement completion writes without
// reading either.
type readTracking struct {
	store.Backend
	mu           sync.Mutex
	tasks, insts map[string]bool // read since the last completing write
}

func (r *readTracking) Task(ctx context.Context, id string) (*store.Task, error) {
	t, err := r.Backend.Task(ctx, id)
	if err == nil {
		r.mu.Lock()
		if r.tasks == nil {
			r.tasks = map[string]bool{}
		}
		r.tasks[id] = true
		r.mu.Unlock()
	}
	return t, err
}

func (r *readTracking) Get(ctx context.Context, id string) (*workflow.Instance, error) {
	inst, err := r.Backend.Get(ctx, id)
	if err == nil {
		r.mu.Lock()
		if r.insts == nil {
			r.insts = map[string]bool{}
		}
		r.insts[id] = true
		r.mu.Unlock()
	}
	return inst, err
}

// oneStatement reports whether w completes a task without the task and its
// instance having been read first, and forgets those reads.
func (r *readTracking) oneStatement(w *store.Write) bool {
	id := completedTask(w)
	if id == "" {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	read := r.tasks[id] && r.insts[w.ID]
	delete(r.tasks, id)
	delete(r.insts, w.ID)
	return !read
}

// commitCounter counts the engine's one-statement completions: the writes
// of a group, and the completing writes made without reading. With
// conflictAll it refuses each of them with a conflict, as if another writer
// had always just moved the instance on, without writing anything.
type commitCounter struct {
	readTracking
	conflictAll                 bool
	landed, conflicts, notifies atomic.Int64
	others                      []error // neither landed nor a conflict
}

// ApplyGroup (group commit) counts each write of the group as Apply
// does.
func (c *commitCounter) ApplyGroup(ctx context.Context, creates []store.CreateParams, ws []*store.Write, claim *store.GroupClaim) ([]*workflow.Instance, []*workflow.Instance, error) {
	for _, w := range ws {
		if w.Notify {
			c.notifies.Add(1)
		}
	}
	if c.conflictAll {
		c.conflicts.Add(int64(len(ws)))
		return nil, nil, &store.ConflictError{Actual: -1, Reason: "refused by the test"}
	}
	created, written, err := c.Backend.ApplyGroup(ctx, creates, ws, claim)
	c.count(err, len(ws))
	return created, written, err
}

func (c *commitCounter) count(err error, n int) {
	switch {
	case err == nil:
		c.landed.Add(int64(n))
	case errors.Is(err, store.ErrConflict):
		c.conflicts.Add(int64(n))
	default:
		c.mu.Lock()
		c.others = append(c.others, err)
		c.mu.Unlock()
	}
}

func (c *commitCounter) errs() []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]error(nil), c.others...)
}

func (c *commitCounter) Apply(ctx context.Context, w *store.Write) (*workflow.Instance, error) {
	if !c.oneStatement(w) {
		return c.Backend.Apply(ctx, w)
	}
	if w.Notify {
		c.notifies.Add(1)
	}
	if c.conflictAll {
		c.conflicts.Add(1)
		return nil, &store.ConflictError{ID: w.ID, Actual: -1, Reason: "refused by the test"}
	}
	inst, err := c.Backend.Apply(ctx, w)
	c.count(err, 1)
	return inst, err
}

// checkChainRun checks a completed chainDef workflow started with input n:
// each step completed once at attempt 1 (contiguous history), and
// c's output rendered from b's. It returns the history causes.
func checkChainRun(t *testing.T, n *node, done *workflow.Instance, input int) []string {
	t.Helper()
	var causes []string
	for _, h := range n.checkHistory(done) {
		causes = append(causes, h.Cause)
	}
	want := []string{"start", `step "a" completed (attempt 1)`,
		`step "b" completed (attempt 1)`, `step "c" completed (attempt 1)`}
	if strings.Join(causes, "|") != strings.Join(want, "|") {
		t.Errorf("%s: history causes %q, want %q", done.ID, causes, want)
	}
	if got, want := output(t, done, "c"), fmt.Sprintf(`{"prev":%d,"text":"n=%d"}`, input, input); got != want {
		t.Errorf("%s: c's output = %s, want %s", done.ID, got, want)
	}
	return causes
}

// Each step of a chain run by in-process workers completes with one
// guarded write decided without reading, and the chain ends exactly as the
// path that reads and decides again ends it: same versions, same history
// causes.
func TestChainCompletesWithOneStatementEach(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		for _, refuse := range []bool{false, true} {
			cc := &commitCounter{conflictAll: refuse}
			n := newNode(t, b, b.newDB(t), nodeOpts{handlers: map[string]engine.Handler{"echo": echo},
				wrap: func(st store.Backend) store.Backend { cc.Backend = st; return cc }})
			n.define(chainDef)
			inst := n.start("chain", "", `{"n": 1, "id": "x"}`)
			done := n.waitStatus(inst.ID, workflow.StatusCompleted, 10*time.Second)
			causes := checkChainRun(t, n, done, 1)
			settle(func() bool { return cc.landed.Load()+cc.conflicts.Load()+int64(len(cc.errs())) >= 3 })
			if refuse {
				// Every completion fell back to the locking path and still
				// leased the next step to itself. The last one, which
				// leaves its worker free, was tried in a group with a claim
				// first, and then alone.
				if cc.conflicts.Load() != 4 || cc.landed.Load() != 0 {
					t.Errorf("refused commits: %d conflicts, %d landed; want 4, 0", cc.conflicts.Load(), cc.landed.Load())
				}
			} else if cc.landed.Load()+int64(len(cc.errs())) != 3 || cc.conflicts.Load() != 0 {
				// A one-statement completion that failed for a reason other
				// than a conflict (a database error) fell back too; it still
				// tried the one-statement way first.
				t.Errorf("%d one-statement completions and %d conflicts for a 3-step chain, want 3 and 0; other errors: %v; history: %q",
					cc.landed.Load(), cc.conflicts.Load(), cc.errs(), causes)
			}
			if errs := cc.errs(); len(errs) > 0 {
				t.Logf("refuse=%v: one-statement completions that failed: %v", refuse, errs)
			}
			// The next step is leased to the worker in the same write: no
			// other worker needs waking up.
			if cc.notifies.Load() != 0 {
				t.Errorf("refuse=%v: %d completions of a chain sent a NOTIFY, want 0", refuse, cc.notifies.Load())
			}
		}
	})
}

// Parallel steps of one instance complete at the same moment: their
// one-statement completions race on the instance's version, the losers fall
// back to the locking path, and nothing is lost — every branch's output is
// in the state, the join step runs once with all of them, and the history
// is contiguous.
func TestFanOutCompletionsRace(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		const branches = 8
		cc := &commitCounter{}
		var joins atomic.Int64
		n := newNode(t, b, b.newDB(t), nodeOpts{workers: branches, handlers: map[string]engine.Handler{
			"echo": echo,
			"join": func(_ context.Context, tk engine.Task) (json.RawMessage, error) {
				joins.Add(1)
				return tk.Input, nil
			},
		}, wrap: func(st store.Backend) store.Backend { cc.Backend = st; return cc }})
		var def strings.Builder
		def.WriteString("name: fan\nsteps:\n  - {id: a, type: task, handler: echo}\n")
		var deps, refs []string
		for i := range branches {
			fmt.Fprintf(&def, "  - {id: b%d, type: task, handler: echo, depends_on: [a], input: %d}\n", i, i)
			deps = append(deps, fmt.Sprintf("b%d", i))
			refs = append(refs, fmt.Sprintf(`"{{ .steps.b%d.output }}"`, i))
		}
		fmt.Fprintf(&def, "  - {id: c, type: task, handler: join, depends_on: [%s], input: [%s]}\n", strings.Join(deps, ", "), strings.Join(refs, ", "))
		n.define(def.String())
		for i := range 5 {
			inst := n.start("fan", fmt.Sprintf("fan-%d", i), `{}`)
			done := n.waitStatus(inst.ID, workflow.StatusCompleted, 20*time.Second)
			n.checkHistory(done)
			for j := range branches {
				if got := output(t, done, fmt.Sprintf("b%d", j)); got != fmt.Sprint(j) {
					t.Errorf("%s: b%d output = %s, want %d", inst.ID, j, got, j)
				}
			}
			if got := output(t, done, "c"); got != "[0,1,2,3,4,5,6,7]" {
				t.Errorf("%s: join output = %s", inst.ID, got)
			}
		}
		if joins.Load() != 5 {
			t.Errorf("the join step ran %d times for 5 workflows", joins.Load())
		}
		t.Logf("%d one-statement completions, %d fell back after a conflict", cc.landed.Load(), cc.conflicts.Load())
	})
}

// batchingStore makes group commit observable: single completions (Apply)
// take a while (so that other workers' completions queue up behind them), and
// batches are counted. With failFirst every batch is refused as a conflict
// before anything is written; with failLast it is sent with a last write
// that fails, so all of it must be rolled back. Either way the
// completions must then be written one by one.
type batchingStore struct {
	readTracking
	failFirst, failLast        bool
	direct, inTx, batches, txs atomic.Int64
	// Starts: written alone, and in committed groups.
	createsDirect, createsInTx atomic.Int64
}

func (s *batchingStore) Apply(ctx context.Context, w *store.Write) (*workflow.Instance, error) {
	if s.oneStatement(w) {
		s.direct.Add(1)
		time.Sleep(5 * time.Millisecond)
	}
	return s.Backend.Apply(ctx, w)
}

func (s *batchingStore) Create(ctx context.Context, p store.CreateParams) (*workflow.Instance, error) {
	s.createsDirect.Add(1)
	time.Sleep(5 * time.Millisecond)
	return s.Backend.Create(ctx, p)
}

var errRefused = &store.ConflictError{Actual: -1, Reason: "refused by the test"}

func (s *batchingStore) ApplyGroup(ctx context.Context, creates []store.CreateParams, ws []*store.Write, claim *store.GroupClaim) ([]*workflow.Instance, []*workflow.Instance, error) {
	s.txs.Add(1)
	if s.failFirst {
		return nil, nil, errRefused
	}
	if s.failLast {
		// A last write that misses (its instance does not exist) after
		// the group's: the store must roll all of the group back.
		missing := &store.Write{ID: "no-such-workflow", From: workflow.StatusRunning, Status: workflow.StatusRunning, Cause: "refused by the test"}
		if _, _, err := s.Backend.ApplyGroup(ctx, creates, append(slices.Clone(ws), missing), claim); err == nil {
			return nil, nil, errors.New("a group with a write of an unknown workflow was written")
		} else if !errors.Is(err, store.ErrNotFound) {
			return nil, nil, err
		}
		return nil, nil, errRefused
	}
	created, written, err := s.Backend.ApplyGroup(ctx, creates, ws, claim)
	if err != nil {
		return nil, nil, err
	}
	s.batches.Add(1)
	s.inTx.Add(int64(len(ws)))
	s.createsInTx.Add(int64(len(creates)))
	return created, written, nil
}

// Completions that wait at the same time are written in one transaction, and
// each workflow still ends exactly as it would alone: every completion
// applied once (version 3: start and three completions; a claim writes
// none), outputs right.
// When a batch fails, its completions are written one by one instead.
func TestCompletionsAreGroupCommitted(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		for _, mode := range []string{"ok", "failFirst", "failLast"} {
			failFirst := mode != "ok"
			bs := &batchingStore{failFirst: mode == "failFirst", failLast: mode == "failLast"}
			n := newNode(t, b, b.newDB(t), nodeOpts{workers: 8, handlers: map[string]engine.Handler{"echo": echo},
				wrap: func(st store.Backend) store.Backend { bs.Backend = st; return bs }})
			n.define(chainDef)
			// Twelve three-step chains on eight workers keep several
			// completions waiting at once, so batches form (a run shows
			// about a third of the completions batched); more only made the
			// test slow on SQLite under the race detector.
			const workflows = 12
			for i := range workflows {
				n.start("chain", fmt.Sprintf("g-%02d", i), fmt.Sprintf(`{"n": %d, "id": "x"}`, i))
			}
			for i := range workflows {
				done := n.waitStatus(fmt.Sprintf("g-%02d", i), workflow.StatusCompleted, 20*time.Second)
				n.checkHistory(done)
				if done.Version != 3 {
					t.Errorf("%s: %s ended at version %d, want 3", mode, done.ID, done.Version)
				}
				if got, want := output(t, done, "c"), fmt.Sprintf(`{"prev":%d,"text":"n=%d"}`, i, i); got != want {
					t.Errorf("%s: %s: c's output = %s, want %s", mode, done.ID, got, want)
				}
			}
			settle(func() bool { return bs.direct.Load()+bs.inTx.Load() >= 3*workflows })
			t.Logf("%s: %d completions written alone, %d in %d batches, %d batch transactions",
				mode, bs.direct.Load(), bs.inTx.Load(), bs.batches.Load(), bs.txs.Load())
			if failFirst {
				if bs.batches.Load() != 0 || bs.txs.Load() == 0 || bs.direct.Load() != 3*workflows {
					t.Errorf("failing batches: %d committed, %d tried, %d completions alone; want 0, > 0, %d",
						bs.batches.Load(), bs.txs.Load(), bs.direct.Load(), 3*workflows)
				}
			} else if bs.inTx.Load() == 0 || bs.direct.Load()+bs.inTx.Load() != 3*workflows {
				t.Errorf("%d completions alone and %d in batches; want some in batches and %d in all",
					bs.direct.Load(), bs.inTx.Load(), 3*workflows)
			}
		}
	})
}

// Starts made while the workers run join the committers' groups (their
// commit is shared with other starts and completions); when a group fails,
// each start is written on its own. Every workflow ends as it would alone.
func TestStartsJoinGroupCommits(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		for _, mode := range []string{"ok", "failFirst", "failLast"} {
			bs := &batchingStore{failFirst: mode == "failFirst", failLast: mode == "failLast"}
			n := newNode(t, b, b.newDB(t), nodeOpts{workers: 8, handlers: map[string]engine.Handler{"echo": echo},
				wrap: func(st store.Backend) store.Backend { bs.Backend = st; return bs }})
			n.define(chainDef)
			// Eight starters at once, each starting its next chain while the
			// workers complete the others' steps: starts join groups from
			// the first round on (a run shows nearly all of them grouped).
			const starters, each = 8, 2
			n.startChainsAtOnce(t, "s", starters, each)
			for g := range starters {
				for i := range each {
					done := n.waitStatus(fmt.Sprintf("s-%d-%d", g, i), workflow.StatusCompleted, 20*time.Second)
					n.checkHistory(done)
					if got, want := output(t, done, "c"), fmt.Sprintf(`{"prev":%d,"text":"n=%d"}`, i, i); got != want {
						t.Errorf("%s: %s: c's output = %s, want %s", mode, done.ID, got, want)
					}
				}
			}
			total := int64(starters * each)
			t.Logf("%s: %d starts written alone, %d in committed groups (%d groups tried)", mode, bs.createsDirect.Load(), bs.createsInTx.Load(), bs.txs.Load())
			switch {
			case bs.createsDirect.Load()+bs.createsInTx.Load() != total:
				t.Errorf("%s: %d starts alone + %d in groups, want %d in all", mode, bs.createsDirect.Load(), bs.createsInTx.Load(), total)
			case mode == "ok" && bs.createsInTx.Load() == 0:
				t.Errorf("no start joined a group")
			case mode != "ok" && bs.txs.Load() == 0:
				t.Errorf("%s: no group was tried", mode)
			}
		}
	})
}

// A start after the engine stopped is written directly, not sent to
// committers that are gone.
func TestStartAfterStop(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{workers: 2, handlers: map[string]engine.Handler{"echo": echo}})
		n.define(chainDef)
		n.eng.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		inst, err := n.eng.StartWorkflow(ctx, engine.StartParams{Definition: "chain", Input: json.RawMessage(`{"n": 1, "id": "x"}`)})
		if err != nil || inst.Status != workflow.StatusRunning {
			t.Fatalf("start after Stop = %v, %v", inst, err)
		}
		if got, err := n.st.Get(ctx, inst.ID); err != nil || got.Version != 0 {
			t.Errorf("the instance started after Stop: %v, %v", got, err)
		}
	})
}

// The worker loops of a node claim together: an idle node with eight workers
// polls with one claim per interval, not eight, and still hands out work to
// all of them when it comes.
func TestIdleWorkersClaimTogether(t *testing.T) {
	b := backends[0]
	cc := &claimCounter{}
	const workers, poll, idle = 8, 50 * time.Millisecond, time.Second
	n := newNode(t, b, b.newDB(t), nodeOpts{workers: workers, handlers: map[string]engine.Handler{"echo": echo},
		wrap: func(st store.Backend) store.Backend { cc.Backend = st; return cc }})
	time.Sleep(idle)
	// newNode's engine polls every 50 ms; eight separate loops would have
	// claimed about 8 × 20 = 160 times.
	if got, most := cc.claims.Load(), int64(3*idle/poll); got > most {
		t.Errorf("an idle node with %d workers claimed %d times in %s (poll %s), want at most %d", workers, got, idle, poll, most)
	} else {
		t.Logf("%d claims in %s", got, idle)
	}
	n.define(chainDef)
	for i := range 2 * workers {
		n.start("chain", fmt.Sprintf("i-%02d", i), `{"n": 1, "id": "x"}`)
	}
	for i := range 2 * workers {
		n.waitStatus(fmt.Sprintf("i-%02d", i), workflow.StatusCompleted, 10*time.Second)
	}
}

// lostAckStore writes every one-statement completion (a group, or a lone
// completing write) and then reports an error, as a connection that breaks
// after the commit would.
type lostAckStore struct {
	readTracking
	lost       atomic.Int64
	lostStarts atomic.Int64 // starts of groups whose answer was lost
	failed     []error      // writes that failed for real
}

var errLostAck = errors.New("connection reset after the commit (test)")

func (s *lostAckStore) fail(err error) {
	s.mu.Lock()
	s.failed = append(s.failed, err)
	s.mu.Unlock()
}

func (s *lostAckStore) Apply(ctx context.Context, w *store.Write) (*workflow.Instance, error) {
	if !s.oneStatement(w) {
		return s.Backend.Apply(ctx, w)
	}
	if _, err := s.Backend.Apply(ctx, w); err != nil {
		s.fail(err)
		return nil, err
	}
	s.lost.Add(1)
	return nil, errLostAck
}

func (s *lostAckStore) ApplyGroup(ctx context.Context, creates []store.CreateParams, ws []*store.Write, claim *store.GroupClaim) ([]*workflow.Instance, []*workflow.Instance, error) {
	if _, _, err := s.Backend.ApplyGroup(ctx, creates, ws, claim); err != nil {
		s.fail(err)
		return nil, nil, err
	}
	s.lost.Add(int64(len(ws)))
	s.lostStarts.Add(int64(len(creates)))
	return nil, nil, errLostAck
}

// A completion whose write landed but whose answer was lost goes on with the
// next step it leased to itself, instead of leaving that step leased to
// nobody until its lease (30 s here) ends and the sweeper counts the
// attempt; and nothing is applied twice.
func TestCompletionWithLostAnswer(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ls := &lostAckStore{}
		n := newNode(t, b, b.newDB(t), nodeOpts{handlers: map[string]engine.Handler{"echo": echo},
			wrap: func(st store.Backend) store.Backend { ls.Backend = st; return ls }})
		n.define(chainDef)
		for i := range 3 {
			inst := n.start("chain", fmt.Sprintf("lost-%d", i), `{"n": 7, "id": "x"}`)
			done := n.waitStatus(inst.ID, workflow.StatusCompleted, 10*time.Second)
			checkChainRun(t, n, done, 7)
		}
		settle(func() bool { return ls.lost.Load() >= 9 })
		if ls.lost.Load() < 9 {
			ls.mu.Lock()
			t.Errorf("%d completions lost their answer, want every one of the 9; writes that failed: %v", ls.lost.Load(), ls.failed)
			ls.mu.Unlock()
		}
	})
}

// startChainsAtOnce starts starters×each chain workflows from starters
// goroutines at once: prefix-g-i with input n = i.
func (n *node) startChainsAtOnce(t *testing.T, prefix string, starters, each int) {
	t.Helper()
	var wg sync.WaitGroup
	for g := range starters {
		wg.Go(func() {
			for i := range each {
				id := fmt.Sprintf("%s-%d-%d", prefix, g, i)
				inst, err := n.eng.StartWorkflow(context.Background(), engine.StartParams{Definition: "chain", ID: id,
					Input: json.RawMessage(fmt.Sprintf(`{"n": %d, "id": "x"}`, i))})
				if err != nil || inst == nil || inst.ID != id {
					t.Errorf("start %s = %v, %v", id, inst, err)
				}
			}
		})
	}
	wg.Wait()
}

// A start whose group was written but whose answer was lost gets its
// instance, not ErrExists for its own row; every workflow runs once.
func TestStartWithLostGroupAnswer(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ls := &lostAckStore{}
		n := newNode(t, b, b.newDB(t), nodeOpts{workers: 8, handlers: map[string]engine.Handler{"echo": echo},
			wrap: func(st store.Backend) store.Backend { ls.Backend = st; return ls }})
		n.define(chainDef)
		const starters, each = 8, 5
		n.startChainsAtOnce(t, "l", starters, each)
		for g := range starters {
			for i := range each {
				done := n.waitStatus(fmt.Sprintf("l-%d-%d", g, i), workflow.StatusCompleted, 20*time.Second)
				checkChainRun(t, n, done, i)
			}
		}
		t.Logf("%d starts were in groups whose answer was lost", ls.lostStarts.Load())
		if ls.lostStarts.Load() == 0 {
			t.Errorf("no start was in a group whose answer was lost: the test did not test it")
		}
	})
}

// slowStarts makes a start's write take a second.
type slowStarts struct{ store.Backend }

func (s *slowStarts) Create(ctx context.Context, p store.CreateParams) (*workflow.Instance, error) {
	time.Sleep(time.Second)
	return s.Backend.Create(context.WithoutCancel(ctx), p)
}

func (s *slowStarts) ApplyGroup(ctx context.Context, creates []store.CreateParams, ws []*store.Write, claim *store.GroupClaim) ([]*workflow.Instance, []*workflow.Instance, error) {
	time.Sleep(time.Second)
	return s.Backend.ApplyGroup(ctx, creates, ws, claim)
}

// A start handed to the committers still ends with its caller's context.
func TestStartHonoursItsContextInTheGroup(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{workers: 1, handlers: map[string]engine.Handler{"echo": echo},
			wrap: func(st store.Backend) store.Backend { return &slowStarts{st} }})
		n.define(chainDef)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		began := time.Now()
		_, err := n.eng.StartWorkflow(ctx, engine.StartParams{Definition: "chain", Input: json.RawMessage(`{"n": 1, "id": "x"}`)})
		if took := time.Since(began); !errors.Is(err, context.DeadlineExceeded) || took > 800*time.Millisecond {
			t.Errorf("start with a 100 ms deadline = %v after %s; want DeadlineExceeded at once", err, took.Round(time.Millisecond))
		}
	})
}

// The iterations of a foreach that in-process workers finish together are
// each decided again on the write before them: in their committer's batch
// after another completion of the instance, or on what the committer wrote
// last. None is written on the version its lease saw, to conflict and be
// read and decided again, until the last ones: the completion that ends
// the step reads the iterations' rows and writes on its own, and the
// batches it overtakes are decided again the same way. Every iteration
// still has its version, its history row and its output in item order.
func TestForeachIterationsAreDecidedOnTheWriteBefore(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		const items = 64
		vc := &versionConflicts{}
		n, inst := runWideForeach(t, b, items, func(st store.Backend) store.Backend { vc.Backend = st; return vc })
		want := make([]string, items)
		for i := range want {
			want[i] = fmt.Sprint(i)
		}
		if got := output(t, inst, "each"); got != "["+strings.Join(want, ",")+"]" {
			t.Errorf("output %s", got)
		}
		if h := n.checkHistory(inst); len(h) != 1+items {
			t.Errorf("%d history rows, want %d: the start and a completion per iteration", len(h), 1+items)
		}
		// Without deciding again, completions conflict from the first
		// versions on; with it, only towards the end (the race detector
		// slows the workers: seen from 11 versions before the last).
		if early := vc.below(items / 2); len(early) > 0 {
			t.Errorf("completions decided on versions %v conflicted", early)
		}
	})
}

// versionConflicts records the versions of the writes that conflicted.
type versionConflicts struct {
	store.Backend
	mu       sync.Mutex
	versions []int64
}

func (v *versionConflicts) record(err error, ws ...*store.Write) {
	if !errors.Is(err, store.ErrConflict) {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, w := range ws {
		v.versions = append(v.versions, w.ExpectedVersion)
	}
}

// below returns the conflicted versions under n.
func (v *versionConflicts) below(n int64) []int64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	var early []int64
	for _, x := range v.versions {
		if x < n {
			early = append(early, x)
		}
	}
	return early
}

func (v *versionConflicts) Apply(ctx context.Context, w *store.Write) (*workflow.Instance, error) {
	inst, err := v.Backend.Apply(ctx, w)
	v.record(err, w)
	return inst, err
}

func (v *versionConflicts) ApplyGroup(ctx context.Context, creates []store.CreateParams, ws []*store.Write, claim *store.GroupClaim) ([]*workflow.Instance, []*workflow.Instance, error) {
	created, written, err := v.Backend.ApplyGroup(ctx, creates, ws, claim)
	v.record(err, ws...)
	return created, written, err
}

// A completion decided in a batch on another completion of the instance
// before it is written only after that one: when the batch fails and is
// written write by write, and the first of the two conflicts (another
// writer took its version), the second, whose version number is now the
// stored one, is not written over the other writer's change.
func TestRedecidedCompletionNeedsTheOneBefore(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		const items = 32
		is := &intrudingStore{}
		n, inst := runWideForeach(t, b, items, func(st store.Backend) store.Backend { is.Backend = st; return is })
		if !is.intruded.Load() {
			t.Skip("no batch held two completions of the workflow")
		}
		if _, ok := inst.State.Variables["intruder"]; !ok {
			t.Errorf("the intruding write's variable is gone: %s", inst.State.Variables)
		}
		if h := n.checkHistory(inst); len(h) != 2+items {
			t.Errorf("%d history rows, want %d: the start, the intruder and a completion per iteration", len(h), 2+items)
		}
		if got := output(t, inst, "each"); strings.Count(got, ",") != items-1 {
			t.Errorf("output %s, want %d items", got, items)
		}
	})
}

// intrudingStore fails the first group that writes two versions of one
// instance, after writing a version of that instance of its own (a
// variable "intruder"): the committers then write the group's writes one
// by one, and the first conflicts.
type intrudingStore struct {
	store.Backend
	intruded atomic.Bool
}

func (s *intrudingStore) ApplyGroup(ctx context.Context, creates []store.CreateParams, ws []*store.Write, claim *store.GroupClaim) ([]*workflow.Instance, []*workflow.Instance, error) {
	seen := map[string]bool{}
	for _, w := range ws {
		if seen[w.ID] && s.intruded.CompareAndSwap(false, true) {
			inst, err := s.Backend.Get(ctx, w.ID)
			if err != nil {
				return nil, nil, err
			}
			st := inst.State.Clone()
			if err := st.SetVar("intruder", true); err != nil {
				return nil, nil, err
			}
			if _, err := s.Backend.Apply(ctx, &store.Write{ID: w.ID, ExpectedVersion: inst.Version, From: inst.Status, Status: inst.Status,
				State: st, Deadline: inst.Deadline, Cause: "intruder"}); err != nil {
				return nil, nil, err
			}
			return nil, nil, errRefused
		}
		seen[w.ID] = true
	}
	return s.Backend.ApplyGroup(ctx, creates, ws, claim)
}

// runWideForeach runs one workflow "w-1" of a foreach over items echoed by
// 8 in-process workers on a store wrapped by wrap, to its end.
func runWideForeach(t *testing.T, b backend, items int, wrap func(store.Backend) store.Backend) (*node, *workflow.Instance) {
	t.Helper()
	n := newNode(t, b, b.newDB(t), nodeOpts{workers: 8, handlers: map[string]engine.Handler{"echo": echo}, wrap: wrap})
	n.define(fmt.Sprintf("name: wide\nsteps:\n  - {id: each, type: task, handler: echo, foreach: '[range(%d)]', input: '{{ .index }}'}\n", items))
	n.start("wide", "w-1", `{}`)
	return n, n.waitStatus("w-1", workflow.StatusCompleted, 20*time.Second)
}
