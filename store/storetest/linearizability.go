package storetest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// LinSize sizes a linearizability run.
type LinSize struct {
	Clients      int // concurrent clients
	OpsPerClient int
	Keys         int // instances the clients share
}

// SmallLinSize is what the conformance suite runs on every test run.
var SmallLinSize = LinSize{Clients: 8, OpsPerClient: 40, Keys: 3}

// StressLinSize is the longer run of `go test -tags stress`.
var StressLinSize = LinSize{Clients: 24, OpsPerClient: 400, Keys: 6}

// The operations recorded in a history.
type linOp int

const (
	opCreate linOp = iota
	opGet
	opUpdate     // UpdateState with an expected version
	opModify     // Modify: increment, decided again on a conflict
	opTransition // Transition from → to
)

type linInput struct {
	op       linOp
	key      string
	value    int64           // create, update: the value written
	expected int64           // update
	from, to workflow.Status // transition
}

type linOutput struct {
	ok       bool
	missing  bool            // ErrNotFound
	exists   bool            // create: ErrExists
	version  int64           // version read or written; for a conflict, the actual one
	value    int64           // get, modify: the value read or written
	status   workflow.Status // get: the status; transition mismatch: the actual one
	conflict bool            // version conflict or status mismatch
}

// linState is one instance as the sequential model sees it.
type linState struct {
	exists  bool
	version int64
	value   int64
	status  workflow.Status
}

// LinModel is a versioned register per instance: every successful write
// increases the version by exactly one, a write with a stale expected version
// fails reporting the version that was current, and reads see the latest write.
var LinModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(linInput).key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return linState{} },
	Step: func(s, in, out any) (bool, any) {
		st, i, o := s.(linState), in.(linInput), out.(linOutput)
		if i.op == opCreate {
			if st.exists {
				return o.exists, st
			}
			return o.ok && o.version == 0, linState{exists: true, value: i.value, status: workflow.StatusPending}
		}
		if !st.exists {
			return o.missing, st
		}
		switch i.op {
		case opGet:
			return o.ok && o.version == st.version && o.value == st.value && o.status == st.status, st
		case opUpdate:
			if st.version != i.expected {
				// A conflict carries the actual version, or -1 when the
				// store could not tell (store.ConflictError): PostgreSQL's
				// guarded write that lost a race inside its statement.
				return o.conflict && (o.version == st.version || o.version < 0), st
			}
			next := linState{exists: true, version: st.version + 1, value: i.value, status: st.status}
			return o.ok && o.version == next.version, next
		case opModify:
			next := linState{exists: true, version: st.version + 1, value: st.value + 1, status: st.status}
			return o.ok && o.version == next.version && o.value == next.value, next
		case opTransition:
			if st.status != i.from {
				return o.conflict && o.status == st.status, st
			}
			next := linState{exists: true, version: st.version + 1, value: st.value, status: i.to}
			return o.ok && o.version == next.version, next
		}
		return false, st
	},
	DescribeOperation: func(in, out any) string {
		i, o := in.(linInput), out.(linOutput)
		var call string
		switch i.op {
		case opCreate:
			call = fmt.Sprintf("create(%d)", i.value)
		case opGet:
			call = "get()"
		case opUpdate:
			call = fmt.Sprintf("update(expect v%d, set %d)", i.expected, i.value)
		case opModify:
			call = "increment()"
		case opTransition:
			call = fmt.Sprintf("transition(%s→%s)", i.from, i.to)
		}
		var res string
		switch {
		case o.missing:
			res = "not found"
		case o.exists:
			res = "exists"
		case o.conflict && i.op == opTransition:
			res = "mismatch, is " + string(o.status)
		case o.conflict:
			res = fmt.Sprintf("conflict, is v%d", o.version)
		default:
			res = fmt.Sprintf("ok v%d value %d %s", o.version, o.value, o.status)
		}
		return fmt.Sprintf("%s %s → %s", i.key, call, res)
	},
}

// transitions the clients try; none reaches a terminal status.
var linTransitions = [][2]workflow.Status{
	{workflow.StatusPending, workflow.StatusRunning},
	{workflow.StatusRunning, workflow.StatusPaused},
	{workflow.StatusPaused, workflow.StatusRunning},
}

// RecordHistory runs concurrent clients against q and returns what each
// operation was asked and answered, with invocation and response times.
func RecordHistory(ctx context.Context, q store.Querier, prefix string, size LinSize) ([]porcupine.Operation, error) {
	start := time.Now()
	now := func() int64 { return int64(time.Since(start)) }
	var mu sync.Mutex
	var history []porcupine.Operation
	var firstErr error
	var wg sync.WaitGroup
	for c := range size.Clients {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(c), uint64(start.UnixNano())))
			seen := map[string]int64{} // the last version this client saw per key
			for n := range size.OpsPerClient {
				key := fmt.Sprintf("%s-k%d", prefix, rnd.IntN(size.Keys))
				in := linInput{key: key, value: int64(c*1_000_000 + n)}
				switch r := rnd.IntN(10); {
				case r == 0:
					in.op = opCreate
				case r < 4:
					in.op = opGet
				case r < 7:
					in.op = opUpdate
					in.expected = seen[key]
				case r < 8:
					in.op = opModify
				default:
					tr := linTransitions[rnd.IntN(len(linTransitions))]
					in.op, in.from, in.to = opTransition, tr[0], tr[1]
				}
				call := now()
				out, err := linApply(ctx, q, in)
				ret := now()
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("%+v: %w", in, err)
					}
					mu.Unlock()
					return
				}
				if out.ok || out.conflict && out.version >= 0 {
					seen[key] = out.version
				}
				mu.Lock()
				history = append(history, porcupine.Operation{ClientId: c, Input: in, Call: call, Output: out, Return: ret})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return history, firstErr
}

// linApply performs one operation and classifies its result; an error is
// returned only for results the model has no place for.
func linApply(ctx context.Context, q store.Querier, in linInput) (linOutput, error) {
	var out linOutput
	var inst *workflow.Instance
	var err error
	switch in.op {
	case opCreate:
		var s workflow.State
		if err := s.SetVar("v", in.value); err != nil {
			return out, err
		}
		inst, err = q.Create(ctx, store.CreateParams{ID: in.key, State: s})
		if errors.Is(err, store.ErrExists) {
			return linOutput{exists: true}, nil
		}
	case opGet:
		inst, err = q.Get(ctx, in.key)
	case opUpdate:
		inst, err = store.UpdateState(ctx, q, in.key, in.expected, func(s *workflow.State) error { return s.SetVar("v", in.value) }, "lin update")
	case opModify:
		inst, err = Modify(ctx, q, in.key, func(i *workflow.Instance) error {
			var v int64
			if _, err := i.State.Var("v", &v); err != nil {
				return err
			}
			return i.State.SetVar("v", v+1)
		}, "lin modify")
	case opTransition:
		inst, err = Transition(ctx, q, store.TransitionParams{ID: in.key, From: in.from, To: in.to})
	}
	var ce *store.ConflictError
	var me *store.StatusMismatchError
	switch {
	case errors.Is(err, store.ErrNotFound):
		return linOutput{missing: true}, nil
	case errors.As(err, &ce):
		return linOutput{conflict: true, version: ce.Actual}, nil
	case errors.As(err, &me):
		return linOutput{conflict: true, status: me.Actual}, nil
	case err != nil:
		return out, err
	}
	out = linOutput{ok: true, version: inst.Version, status: inst.Status}
	if _, err := inst.State.Var("v", &out.value); err != nil {
		return out, err
	}
	return out, nil
}

// CheckLinearizable records a history against q and fails t unless porcupine
// finds it linearizable under LinModel.
func CheckLinearizable(t *testing.T, q store.Querier, prefix string, size LinSize) {
	t.Helper()
	history, err := RecordHistory(t.Context(), q, prefix, size)
	if err != nil {
		t.Fatalf("recording the history: %v", err)
	}
	res, info := porcupine.CheckOperationsVerbose(LinModel, history, time.Minute)
	switch res {
	case porcupine.Ok:
		t.Logf("%d operations by %d clients on %d instances: linearizable", len(history), size.Clients, size.Keys)
	case porcupine.Unknown:
		t.Logf("the checker timed out on %d operations: no violation found", len(history))
	default:
		path := t.TempDir() + "/linearizability.html"
		_ = porcupine.VisualizePath(LinModel, info, path)
		t.Errorf("the history of %d operations is NOT linearizable (visualisation: %s)", len(history), path)
		for _, part := range LinModel.Partition(history) {
			if porcupine.CheckOperations(LinModel, part) {
				continue
			}
			slices.SortFunc(part, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
			for _, op := range part {
				t.Logf("client %2d [%9d, %9d] %s", op.ClientId, op.Call, op.Return, LinModel.DescribeOperation(op.Input, op.Output))
			}
			break
		}
	}
}

var linearizabilityTests = []conformanceTest{
	{"Linearizability_history", func(t *testing.T, h Harness) {
		CheckLinearizable(t, setup(t, h).s, "lin", SmallLinSize)
	}},
	{"Linearizability_detectsLostUpdates", testLinDetectsLostUpdates},
}

// RunLinearizability checks a history of the given size against a fresh
// store of h (the long version runs under `go test -tags stress`).
func RunLinearizability(t *testing.T, h Harness, size LinSize) {
	CheckLinearizable(t, setup(t, h).s, "lin", size)
}

// lostUpdateQuerier breaks the contract on purpose: its Apply writes over
// whatever version is current (last writer wins), as a write guarded by
// nothing would.
type lostUpdateQuerier struct{ store.Querier }

func (q lostUpdateQuerier) Apply(ctx context.Context, w *store.Write) (*workflow.Instance, error) {
	// The other clients' writes get in before this one, as they would on a
	// busy store: on a loaded machine the clients may otherwise run one
	// after the other, each on the versions it saw, and lose nothing.
	time.Sleep(time.Millisecond)
	if cur, err := q.Querier.Get(ctx, w.ID); err == nil {
		w.ExpectedVersion = cur.Version
	}
	return q.Querier.Apply(ctx, w)
}

// testLinDetectsLostUpdates proves the check can fail: the same workload on a
// store that drops the version check must be found not linearizable.
func testLinDetectsLostUpdates(t *testing.T, h Harness) {
	q := lostUpdateQuerier{setup(t, h).s}
	for round := range 5 {
		history, err := RecordHistory(t.Context(), q, fmt.Sprintf("lost%d", round), LinSize{Clients: 8, OpsPerClient: 40, Keys: 2})
		if err != nil {
			t.Fatal(err)
		}
		if porcupine.CheckOperationsTimeout(LinModel, history, time.Minute) == porcupine.Illegal {
			return
		}
	}
	t.Fatal("a store that ignores expected versions passed the linearizability check five times")
}
