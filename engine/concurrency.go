package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/flowd/flowd/engine/rules"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// Definition concurrency limits. The store guards the limit itself: every
// write that makes an instance with a concurrency key hold a slot is
// refused (store.ErrConcurrencyLimit) when the key has none free, whoever
// writes it. The engine only decides what a start over the limit does (its
// definition's strategy) and starts QUEUED instances when slots free:
// right after each write of this node that frees one, and on every sweep as
// a safety net for a node that died in between.

// promoteBatch bounds the QUEUED instances one promotion reads.
const promoteBatch = 100

// slotOf is the concurrency slot of an instance of c started with input
// (nil when c has no concurrency limit), its key rendered to at most max
// bytes. A key that does not render is the caller's mistake:
// ErrInvalidArgument.
func slotOf(c *compiled, input json.RawMessage, max int) (*store.ConcurrencySlot, error) {
	cc := c.Def.Concurrency
	if cc == nil {
		return nil, nil
	}
	key, err := cc.RenderKey(input, max)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", store.ErrInvalidArgument, err)
	}
	return &store.ConcurrencySlot{Key: key, Limit: cc.Limit}, nil
}

// startOverLimit starts an instance whose RUNNING create the store refused
// for lack of a slot, as its definition's strategy says: queued (created
// QUEUED), cancelled (created, then CANCELLED in the same transaction) or
// making room (the key's oldest RUNNING instance cancelled and this one
// created RUNNING in one transaction). p is the refused create.
func (e *Engine) startOverLimit(ctx context.Context, c *compiled, p store.CreateParams) (*workflow.Instance, error) {
	for attempt := 1; ; attempt++ {
		holders, err := e.st.Due(ctx, store.DueParams{Kind: store.DueHolder, Definition: p.Definition, Key: p.Concurrency.Key, Limit: 1})
		if err != nil {
			return nil, err
		}
		var oldest *workflow.Instance
		if len(holders) > 0 {
			oldest = holders[0].Instance
		}
		action, err := rules.OverLimitAction(c.Def.Concurrency.Strategy, oldest != nil)
		if err != nil {
			return nil, err
		}
		switch action {
		case rules.OverLimitQueue:
			return e.createQueued(ctx, c, p)
		case rules.OverLimitCancel:
			return e.createCancelled(ctx, c, p)
		}
		out, err := e.makeRoom(ctx, oldest, p)
		// The oldest holder moved (finished, cancelled by another start) or
		// another start took the freed slot: look again.
		if (errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrConcurrencyLimit)) && attempt < maxApplyAttempts && ctx.Err() == nil {
			continue
		}
		return out, err
	}
}

// queuedParams turns the refused create p into the create of the same
// instance QUEUED: its steps PENDING (but a re-run's kept records), no
// task, no deadline (the workflow timeout runs from its start).
func queuedParams(c *compiled, p store.CreateParams) store.CreateParams {
	q := p
	var rerun workflow.State
	if p.RerunOf != "" {
		rerun = p.State
	}
	state := rules.QueuedState(c, rerun)
	state.Variables, state.Extra = p.State.Variables, p.State.Extra
	q.Status, q.State, q.Deadline, q.Tasks, q.Notify = workflow.StatusQueued, state, nil, nil, false
	q.Cause = rules.QueuedCause
	return q
}

// createQueued creates the instance QUEUED and then promotes the key's
// queue: a slot freed between the refused create and this one, whose
// promotion ran before this instance was stored, would otherwise wait for
// the sweeper.
func (e *Engine) createQueued(ctx context.Context, c *compiled, p store.CreateParams) (*workflow.Instance, error) {
	out, err := e.st.Create(ctx, queuedParams(c, p))
	if err != nil {
		return nil, err
	}
	if e.promote(ctx, p.Definition, p.Concurrency.Key) {
		if cur, err := e.st.Get(ctx, out.ID); err == nil {
			return cur, nil
		}
	}
	return out, nil
}

// createCancelled creates the instance and cancels it in one group write:
// version 0 QUEUED, version 1 CANCELLED with the cause "concurrency limit"
// (an instance is never created in a terminal status).
func (e *Engine) createCancelled(ctx context.Context, c *compiled, p store.CreateParams) (*workflow.Instance, error) {
	q := queuedParams(c, p)
	if q.ID == "" {
		q.ID = store.NewID() // the cancel names the instance it creates
	}
	// Created QUEUED, without tasks and without a parent (a child over its
	// limit is the parent's to decide: startChildOverLimit): its cancel
	// writes the status alone.
	queued := &workflow.Instance{ID: q.ID, Status: q.Status, State: q.State}
	ch := rules.SetStatus(queued, workflow.StatusCancelled, nil)
	d := &decided{id: q.ID, version: 0, from: q.Status, cause: workflow.ConcurrencyLimitCause, ch: ch}
	_, written, err := e.st.ApplyGroup(ctx, []store.CreateParams{q}, []*store.Write{d.write(e.clock())}, nil)
	if err != nil {
		return nil, err
	}
	return written[0], nil
}

// makeRoom cancels oldest, the key's oldest RUNNING instance as read, and
// creates p RUNNING, in one group write (the cancel first: store.GroupOrder):
// the cancel is decided as any cancel (its tasks released), guarded by the
// version read, and the create is checked against the limit as every
// write is, so the two either both happen or neither. Everything is read
// and decided before the write: a decision may evaluate programs (the
// cancelled instance's parent takes its outcome), which must not hold a
// single-writer store's write lock.
func (e *Engine) makeRoom(ctx context.Context, oldest *workflow.Instance, p store.CreateParams) (*workflow.Instance, error) {
	var out *workflow.Instance
	var ws []*store.Write
	err := e.withDefs(ctx, func() error {
		tasks, err := e.st.TasksOfInstance(ctx, oldest.ID)
		if err != nil {
			return err
		}
		oc, err := e.definitionOf(oldest)
		if err != nil {
			return err
		}
		now := e.clock()
		inst := *oldest
		inst.State = oldest.State.Clone()
		d := &decided{id: oldest.ID, version: oldest.Version, from: oldest.Status, cause: rules.MadeRoomCause, read: byID(tasks...)}
		if d.ch, err = e.rulesFor(ctx).Act(oc, &inst, "cancel", byStep(tasks), now); err != nil {
			return err
		}
		d.ch.Update = append(d.ch.Update, rules.CancelTasks(copies(tasks))...)
		if ws, err = e.withParents(ctx, e.st, d.write(now)); err != nil {
			return err
		}
		created, _, err := e.st.ApplyGroup(ctx, []store.CreateParams{p}, ws, nil)
		if err != nil {
			return err
		}
		out = created[0]
		return nil
	})
	if err != nil {
		return nil, err
	}
	e.wakeForParents(ws[1:])
	e.cascadeSoon() // oldest's descendants (cascade.go)
	if p.Notify {
		e.wake()
	}
	return out, nil
}

// afterWrite promotes the QUEUED instances of inst's key when w, a write of
// this node that inst is the result of, freed a slot.
func (e *Engine) afterWrite(ctx context.Context, inst *workflow.Instance, w *store.Write) {
	if inst == nil || w == nil || w.TasksOnly || !rules.FreesSlot(w.From, w.FinalStatus()) {
		return
	}
	e.afterFreed(ctx, inst)
}

// afterFreed promotes the QUEUED instances of inst's key, inst having just
// left a status that holds a slot. Its failures are the sweeper's to
// make good: the write that freed the slot succeeded.
func (e *Engine) afterFreed(ctx context.Context, inst *workflow.Instance) {
	if inst == nil || inst.Definition == "" {
		return
	}
	var slot *store.ConcurrencySlot
	err := e.withDefs(ctx, func() error {
		c, err := e.cached(inst)
		if err != nil {
			return err
		}
		slot, err = slotOf(c, inst.Input, e.maxState)
		return err
	})
	if err != nil || slot == nil {
		return
	}
	e.promote(ctx, inst.Definition, slot.Key)
}

// promote starts the oldest QUEUED instances of definition's key key while
// it has free slots, and reports whether it started any.
func (e *Engine) promote(ctx context.Context, definition, key string) bool {
	started := false
	for {
		queued, err := e.st.Due(ctx, store.DueParams{Kind: store.DueQueued, Definition: definition, Key: key, Limit: promoteBatch})
		if err != nil || len(queued) == 0 {
			return started
		}
		for _, inst := range store.DueInstances(queued) {
			ok, err := e.startQueued(ctx, inst.ID)
			if err != nil {
				if !errors.Is(err, store.ErrConcurrencyLimit) && ctx.Err() == nil {
					e.log.Warn("starting a queued workflow failed", "workflow", inst.ID, "err", err)
				}
				return started
			}
			started = started || ok
		}
		if len(queued) < promoteBatch {
			return started
		}
	}
}

// promoteDue is the sweeper's promotion: every key with QUEUED instances
// and free slots, for a node that died between a write that freed a slot
// and its promotion (or a write past the engine that freed one).
func (e *Engine) promoteDue(ctx context.Context) error {
	queued, err := e.st.Due(ctx, store.DueParams{Kind: store.DueQueued, Limit: sweepBatch})
	if err != nil {
		return err
	}
	for _, inst := range store.DueInstances(queued) {
		if _, err := e.startQueued(ctx, inst.ID); err != nil && !errors.Is(err, store.ErrConcurrencyLimit) {
			if ctx.Err() != nil {
				return err
			}
			e.log.Warn("starting a queued workflow failed", "workflow", inst.ID, "err", err)
		}
	}
	return nil
}

// startQueued starts the QUEUED instance id (rules.Env.Promote) with one
// guarded write, which the store refuses with store.ErrConcurrencyLimit
// when its key has no free slot (another node was faster). ok is false when
// the instance is no longer QUEUED.
func (e *Engine) startQueued(ctx context.Context, id string) (ok bool, err error) {
	var out *workflow.Instance
	var ch *rules.Change
	err = e.withDefs(ctx, func() error {
		var err error
		out, _, ch, err = e.readDecideApply(ctx, about(id), func(q store.Querier, now time.Time) (*decided, error) {
			inst, err := q.Get(ctx, id)
			if err != nil || inst.Status != workflow.StatusQueued {
				return nil, err
			}
			c, err := e.cached(inst)
			if err != nil {
				return nil, err
			}
			// A QUEUED instance has no task rows (queuedParams): all of
			// them are read.
			d := &decided{id: id, version: inst.Version, from: inst.Status, allRows: true}
			d.ch, err = e.rulesFor(ctx).Promote(c, inst, now)
			return d, err
		})
		return err
	})
	if err != nil || out == nil {
		return false, err
	}
	if ch.Notify {
		e.wake()
	}
	return true, nil
}

// errQueuedStart explains a start of a QUEUED instance over the limit (POST
// …/status QUEUED → RUNNING).
var errQueuedStart = errors.New("its concurrency key has no free slot; it starts when one frees")

// startQueuedNow is POST …/status QUEUED → RUNNING: the instance starts now
// if its key has a free slot (store.ErrConcurrencyLimit otherwise).
func (e *Engine) startQueuedNow(ctx context.Context, id string) (*workflow.Instance, error) {
	ok, err := e.startQueued(ctx, id)
	if errors.Is(err, store.ErrConcurrencyLimit) {
		return nil, fmt.Errorf("workflow %s: %w: %w", id, store.ErrConcurrencyLimit, errQueuedStart)
	}
	if err != nil {
		return nil, err
	}
	inst, err := e.st.Get(ctx, id)
	if err == nil && !ok {
		return nil, &store.StatusMismatchError{ID: id, Expected: workflow.StatusQueued, Actual: inst.Status}
	}
	return inst, err
}
