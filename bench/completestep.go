package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// completeStepScenario: each client owns instances with cfg.Steps PENDING
// steps and completes them one by one with CompleteStep at the version it
// knows the instance is at. A client that has completed every step of its
// instances creates another one; that creation is not an op and is not timed.
type completeStepScenario struct {
	r       *runner
	stepIDs []string
	state   workflow.State
	seq     atomic.Int64
	created atomic.Int64 // instances created during the run
	owned   [][]*stepInstance
}

// stepInstance is one instance as its owning client knows it.
type stepInstance struct {
	id        string
	version   int64
	next      int   // index of the next step to complete
	completed int64 // completions acknowledged
	unknown   int64 // completions that failed other than by a conflict
}

// preparedPerClient is how many instances each client starts with.
const preparedPerClient = 2

var stepOutput = json.RawMessage(`{"ok":true}`)

func (cs *completeStepScenario) prepare(ctx context.Context) error {
	n := cs.r.cfg.Steps
	cs.stepIDs = make([]string, n)
	cs.state = workflow.State{Steps: make(map[string]*workflow.StepState, n)}
	for i := range n {
		cs.stepIDs[i] = fmt.Sprintf("s%05d", i)
		cs.state.Steps[cs.stepIDs[i]] = &workflow.StepState{Status: workflow.StepPending}
	}
	cs.owned = make([][]*stepInstance, cs.r.cfg.Clients)
	var all []*stepInstance
	for c := range cs.owned {
		for range preparedPerClient {
			si := &stepInstance{id: cs.newID()}
			cs.owned[c] = append(cs.owned[c], si)
			all = append(all, si)
		}
	}
	return cs.r.createMany(ctx, len(all), func(i int) store.CreateParams {
		return store.CreateParams{ID: all[i].id, State: cs.state, Cause: "bench prepare"}
	})
}

func (cs *completeStepScenario) newID() string {
	return fmt.Sprintf("%sc%07d", cs.r.prefix, cs.seq.Add(1)-1)
}

func (cs *completeStepScenario) client(ctx context.Context, c *client) {
	s := cs.r.s
	mine := cs.owned[c.id]
	cur := 0
	for c.running() {
		if mine[cur].next == len(cs.stepIDs) {
			if cur+1 == len(mine) {
				si := &stepInstance{id: cs.newID()}
				if _, err := s.Create(ctx, store.CreateParams{ID: si.id, State: cs.state, Cause: "bench prepare"}); err != nil {
					cs.r.classify("create", si.id, err)
					continue
				}
				cs.created.Add(1)
				mine = append(mine, si)
				cs.owned[c.id] = mine
			}
			cur++
		}
		si := mine[cur]
		step := cs.stepIDs[si.next]
		err := c.do("complete-step", si.id, func() error {
			return completeStep(ctx, s, si.id, step, si.version)
		})
		if err == nil {
			si.version++
			si.next++
			si.completed++
			continue
		}
		if !errors.Is(err, store.ErrConflict) {
			si.unknown++
		}
		// Find out where the instance really is before going on.
		inst, gerr := s.Get(ctx, si.id)
		if gerr != nil {
			continue
		}
		si.version = inst.Version
		for si.next < len(cs.stepIDs) && inst.State.Steps[cs.stepIDs[si.next]].Status == workflow.StepCompleted {
			si.next++
		}
	}
}

// verify: the completed steps in the data are the completions acknowledged,
// and each instance's version counts them.
func (cs *completeStepScenario) verify(ctx context.Context, res *Result) error {
	var all []*stepInstance
	for _, mine := range cs.owned {
		all = append(all, mine...)
	}
	res.Instances = len(all)
	var lost atomic.Int64
	m := &mismatches{r: cs.r}
	err := cs.r.forEach(ctx, len(all), func(i int) error {
		si := all[i]
		inst, err := cs.r.s.Get(ctx, si.id)
		if err != nil {
			return err
		}
		var done int64
		for _, st := range inst.State.Steps {
			if st.Status == workflow.StepCompleted {
				done++
			}
		}
		if d := unaccounted(si.completed, si.unknown, done) + abs(inst.Version-done); d != 0 {
			lost.Add(d)
			m.report("instance %s: %d steps COMPLETED, version %d, %d completions acknowledged (%d unknown)", si.id, done, inst.Version, si.completed, si.unknown)
		}
		return nil
	})
	res.LostUpdates = lost.Load()
	if n := cs.created.Load(); n > 0 {
		cs.r.logf("complete-step: clients created %d more instances during the run", n)
	}
	return err
}

func (cs *completeStepScenario) close() {}

// completeStep completes step of instance id, read at version, with the
// one guarded write: the read, the step completed in Go, the write guarded
// by version (a *store.ConflictError when the instance moved on).
func completeStep(ctx context.Context, s store.Querier, id, step string, version int64) error {
	inst, err := s.Get(ctx, id)
	if err != nil {
		return err
	}
	if err := inst.State.CompleteStep(step, stepOutput); err != nil {
		return fmt.Errorf("workflow %q: %w", id, err)
	}
	_, err = s.Apply(ctx, &store.Write{ID: id, ExpectedVersion: version, From: inst.Status,
		Status: inst.Status, State: inst.State, Deadline: inst.Deadline, Cause: "bench complete-step"})
	return err
}
