package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// The update and contended instances are free-form and PENDING, so that the
// batch scenario (RUNNING ↔ PAUSED) never sees them in a shared database.

// updateScenario: each op reads a random instance (Get) and writes counter+1
// with one guarded write (Apply) at the version it read: one read and one
// conditional write, the work of the pgbench script of scripts/bench-compare.
// (store.UpdateState would read the row a second time.) A version mismatch is
// a conflict: counted, not retried.
type updateScenario struct {
	r         *runner
	ids       []string
	successes []atomic.Int64 // per instance
	unknown   []atomic.Int64 // per instance: failed other than by a conflict
}

func (u *updateScenario) prepare(ctx context.Context) error {
	n := u.r.cfg.Instances
	u.ids = make([]string, n)
	for i := range u.ids {
		u.ids[i] = fmt.Sprintf("%su%07d", u.r.prefix, i)
	}
	u.successes = make([]atomic.Int64, n)
	u.unknown = make([]atomic.Int64, n)
	state := counterState(u.r.cfg.StateSize)
	return u.r.createMany(ctx, n, func(i int) store.CreateParams {
		return store.CreateParams{ID: u.ids[i], State: state, Cause: "bench prepare"}
	})
}

func (u *updateScenario) client(ctx context.Context, c *client) {
	s := u.r.s
	for c.running() {
		i := rand.IntN(len(u.ids))
		id := u.ids[i]
		err := c.do("update", id, func() error {
			inst, err := s.Get(ctx, id)
			if err != nil {
				return err
			}
			// inst is this op's own copy: its state can be changed in place.
			if err := increment(&inst.State); err != nil {
				return err
			}
			_, err = s.Apply(ctx, &store.Write{ID: id, ExpectedVersion: inst.Version, From: inst.Status,
				Status: inst.Status, State: inst.State, Deadline: inst.Deadline, Cause: "bench update"})
			return err
		})
		switch {
		case err == nil:
			u.successes[i].Add(1)
		case !errors.Is(err, store.ErrConflict):
			u.unknown[i].Add(1)
		}
	}
}

// verify: every instance's counter equals the increments clients recorded for
// it, and its version equals its counter (it started at 0/0 and nothing else
// writes it).
func (u *updateScenario) verify(ctx context.Context, res *Result) error {
	res.Instances = len(u.ids)
	var lost atomic.Int64
	m := &mismatches{r: u.r}
	err := u.r.forEach(ctx, len(u.ids), func(i int) error {
		inst, err := u.r.s.Get(ctx, u.ids[i])
		if err != nil {
			return err
		}
		n, err := counter(inst.State)
		if err != nil {
			return fmt.Errorf("instance %s: %w", inst.ID, err)
		}
		rec, unk := u.successes[i].Load(), u.unknown[i].Load()
		if d := unaccounted(rec, unk, n) + abs(inst.Version-n); d != 0 {
			lost.Add(d)
			m.report("instance %s: counter %d, version %d, %d increments acknowledged (%d unknown)", inst.ID, n, inst.Version, rec, unk)
		}
		return nil
	})
	res.LostUpdates = lost.Load()
	return err
}

func (u *updateScenario) close() {}

// contendedScenario: every client increments the counter of one instance,
// with the engine's ModifyState (writers take turns in the process and a
// lost race is decided again: no conflicts) or UpdateWithRetry.
type contendedScenario struct {
	r                  *runner
	eng                *engine.Engine // ModeModify's
	id                 string
	before             *workflow.Instance
	successes, unknown atomic.Int64
}

func (h *contendedScenario) prepare(ctx context.Context) error {
	h.id = h.r.prefix + "hot"
	if h.r.cfg.Mode != ModeRetry {
		eng, err := engine.New(engine.Config{Store: h.r.s, Logger: slog.New(slog.DiscardHandler), Workers: &h.r.cfg.Workers})
		if err != nil {
			return err
		}
		h.eng = eng
	}
	inst, err := h.r.s.Create(ctx, store.CreateParams{ID: h.id, State: counterState(h.r.cfg.StateSize), Cause: "bench prepare"})
	h.before = inst
	return err
}

func (h *contendedScenario) client(ctx context.Context, c *client) {
	s := h.r.s
	policy := h.r.cfg.Retry
	policy.OnRetry = func(int, error) { h.r.retries.Add(1) }
	modify := func(inst *workflow.Instance) error { return increment(&inst.State) }
	for c.running() {
		err := c.do(h.r.cfg.Mode, h.id, func() error {
			var err error
			if h.r.cfg.Mode == ModeRetry {
				_, err = store.UpdateWithRetry(ctx, s, h.id, policy, increment, "bench contended")
			} else {
				_, err = h.eng.ModifyState(ctx, h.id, modify, "bench contended")
			}
			return err
		})
		switch {
		case err == nil:
			h.successes.Add(1)
		case !errors.Is(err, store.ErrConflict):
			h.unknown.Add(1)
		}
	}
}

// verify: the counter grew by the acknowledged increments, and the version
// by as much as the counter.
func (h *contendedScenario) verify(ctx context.Context, res *Result) error {
	res.Instances = 1
	after, err := h.r.s.Get(ctx, h.id)
	if err != nil {
		return err
	}
	n0, err := counter(h.before.State)
	if err != nil {
		return err
	}
	n1, err := counter(after.State)
	if err != nil {
		return err
	}
	rec, unk := h.successes.Load(), h.unknown.Load()
	dc, dv := n1-n0, after.Version-h.before.Version
	res.LostUpdates = unaccounted(rec, unk, dc) + abs(dv-dc)
	if res.LostUpdates != 0 {
		(&mismatches{r: h.r}).report("instance %s: counter +%d, version +%d, %d increments acknowledged (%d unknown)", h.id, dc, dv, rec, unk)
	}
	return nil
}

func (h *contendedScenario) close() {}
