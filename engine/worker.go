package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/flowd/flowd/engine/rules"
	"github.com/flowd/flowd/internal/outbound"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/worker/task"
	"github.com/flowd/flowd/workflow"
)

// runWorkers runs e.workers worker loops for the in-process handlers, the
// timers and the http steps. A free loop claims its next task itself; when
// there is none it waits for the claimer, which claims for every idle loop in
// one transaction (SKIP LOCKED keeps concurrent claimers from taking the same
// tasks). Completions and starts go through the committers (commit.go);
// groupDone is closed when they end, and starts are written directly from then
// on.
//
// claimCtx ends when a shutdown begins: the loops claim nothing more, finish
// what they run and return. runCtx ends when the handlers must give up.
func (e *Engine) runWorkers(claimCtx, runCtx context.Context, groupDone chan<- struct{}) {
	// A handler registered under a name of the engine's own queues
	// ("flowd:…") is never served: its tasks (timers, http calls, steps
	// waiting for an event) are the engine's, as remote workers cannot poll
	// for them either.
	queues := slices.DeleteFunc(slices.Sorted(maps.Keys(e.handlers)), func(name string) bool { return strings.HasPrefix(name, "flowd:") })
	queues = append(queues, store.QueueSleep, store.QueueHTTP, store.QueueChild, store.QueueTick, store.QueueSWCall, store.QueueSWEmit)
	stop := make(chan struct{})
	claims := make(chan *claimReq)
	var helpers sync.WaitGroup
	helpers.Go(func() {
		e.runCommitters(context.WithoutCancel(runCtx), stop)
		close(groupDone) // starts sent from now on are written directly
	})
	helpers.Go(func() { e.runClaimer(claimCtx, queues, claims, stop) })
	helpers.Go(func() { e.recordPool(claimCtx) })
	var loops sync.WaitGroup
	for range e.workers {
		loops.Go(func() { e.workerLoop(claimCtx, runCtx, queues, claims) })
	}
	loops.Wait()
	close(stop) // the workers, the only senders to the claimer and the committers, are done
	helpers.Wait()
}

// claimReq is an idle worker loop waiting for a task. The claimer answers
// each request once: with a task, or with nil when the engine stops.
type claimReq struct{ reply chan *leased }

// runClaimer claims for the idle worker loops, all of them in one claim
// transaction, whenever work is scheduled (a wake-up from this node or, on
// PostgreSQL, another one) and every poll interval: an idle node polls the
// database once per interval, not once per worker. A wake-up that comes
// while no loop waits is kept for the next one to arrive: it may have been
// meant for it.
func (e *Engine) runClaimer(ctx context.Context, queues []string, reqs <-chan *claimReq, stop <-chan struct{}) {
	wake, release := e.waiter()
	defer release()
	tick := time.NewTicker(e.poll)
	defer tick.Stop()
	var waiting []*claimReq
	done := ctx.Done()
	claimNow, woken := false, false
	for {
		if claimNow && len(waiting) > 0 && ctx.Err() == nil {
			asked := len(waiting)
			tasks, err := e.claim(ctx, queues, asked, e.node, e.lease)
			if err != nil && ctx.Err() == nil {
				e.log.Warn("claiming tasks", "err", err)
			}
			for i := range tasks {
				waiting[i].reply <- &tasks[i]
			}
			waiting = waiting[len(tasks):]
			// Every waiting loop got a task, so there may be more, or the
			// claim failed: the next loop to arrive claims at once. A claim
			// that came back short emptied the queue.
			woken = err != nil || len(tasks) == asked
		}
		claimNow = false
		select {
		case r := <-reqs:
			if ctx.Err() != nil {
				r.reply <- nil
				continue
			}
			waiting = append(waiting, r)
			claimNow = woken
		case <-wake:
			woken, claimNow = true, true
		case <-tick.C:
			claimNow = true
		case <-done:
			for _, r := range waiting {
				r.reply <- nil
			}
			waiting, done = nil, nil
		case <-stop:
			return
		}
	}
}

// workerLoop claims a task and runs it, and then the next steps its
// completions lease to it. A busy loop claims on its own, at once, so that
// claims of busy loops run in parallel; a loop that found nothing waits for
// the claimer, which claims for all idle loops together.
func (e *Engine) workerLoop(ctx, runCtx context.Context, queues []string, claims chan<- *claimReq) {
	req := &claimReq{reply: make(chan *leased, 1)}
	for ctx.Err() == nil {
		tasks, err := e.claim(ctx, queues, 1, e.node, e.lease)
		if err != nil && ctx.Err() == nil {
			e.log.Warn("claiming tasks", "err", err)
		}
		var next *leased
		if len(tasks) > 0 {
			next = &tasks[0]
		} else if ctx.Err() == nil {
			claims <- req
			next = <-req.reply
		}
		for next != nil {
			next = e.execute(ctx, runCtx, *next, queues)
		}
	}
}

// execute runs one claimed task to its end: the handler (with heartbeats) and
// then the completion or failure. Once claimCtx has ended (a shutdown began)
// the completion leases no next task. A task whose handler gave up because
// runCtx ended (the shutdown's deadline passed) is released, not failed.
func (e *Engine) execute(claimCtx, runCtx context.Context, t leased, queues []string) (next *leased) {
	if t.Handler == store.QueueChild {
		// Nothing runs here: the child workflow is started, and its
		// outcome ends the attempt.
		e.startChild(context.WithoutCancel(runCtx), t.Task)
		return nil
	}
	run := IsRun(&t.Task)
	if run {
		// A code workflow's run replays its journal; its checkpoints
		// move the instance on, so the instance the claim read is not its
		// outcome's base: that is its cursor's (fromCursor, below), else a
		// fresh read.
		defer e.runs.drop(t.ID)
		if err := e.withJournal(runCtx, &t); err != nil {
			e.log.Warn("reading the journal of a run", "task", t.ID, "workflow", t.WorkflowID, "err", err)
			return nil
		}
		t.inst = nil
	}
	// The attempt's span (when tracing) runs from here to the recorded
	// outcome: the handler's work and the store writes nest under it.
	runCtx, span := e.startAttempt(runCtx, t.Task)
	// The attempt may not outlive its lease; heartbeats move this along.
	ctx, cancel := context.WithCancelCause(runCtx)
	defer cancel(nil)
	var hb sync.WaitGroup
	leaseUntil := t.LeaseUntil
	hb.Go(func() { leaseUntil = e.heartbeat(ctx, cancel, t.Task) })
	e.running.Add(1)
	output, err := e.run(ctx, t.Task)
	herr := err
	e.running.Add(-1)
	cancel(nil)
	hb.Wait()
	if run {
		// Its outcome is decided on the instance as its last checkpoint
		// left it, when its cursor has that.
		e.fromCursor(&t)
	}
	if t.row != nil && !leaseUntil.Equal(t.row.LeaseUntil) {
		// The one-statement completion is guarded by the row as the
		// heartbeats left it.
		row := *t.row
		row.LeaseUntil = leaseUntil
		t.row = &row
	}

	// Record the outcome even while stopping: the work is done.
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(runCtx), 10*time.Second)
	defer rcancel()
	switch {
	case run && errors.Is(err, task.ErrRunEnded):
		// The run waits (its suspend was its outcome) or lost its lease.
		err = nil
	case err == nil:
		if claimCtx.Err() != nil {
			queues = nil
		}
		next, err = e.completeAndLeaseNext(rctx, t, output, queues)
		if errors.Is(err, workflow.ErrStateTooLarge) {
			// The output cannot be stored, and running the handler again
			// would most likely return it again: the attempt fails for
			// good, as with output that is not JSON, naming the limit.
			err = e.FailTask(rctx, t.ID, t.Lease, "the handler's output cannot be stored: "+err.Error(), false)
		}
	case runCtx.Err() != nil:
		err = e.release(rctx, t.ID, t.Lease)
	default:
		err = e.FailTask(rctx, t.ID, t.Lease, err.Error(), !IsPermanent(err))
	}
	if err != nil {
		level := e.log.Warn
		if errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrNotRunning) {
			level = e.log.Debug // fenced off: someone else owns the step now
		}
		level("recording task outcome", "task", t.ID, "workflow", t.WorkflowID, "step", t.Step, "err", err)
	}
	endAttempt(span, herr, err, herr != nil && runCtx.Err() != nil)
	return next
}

// heartbeat renews the lease at a third of what is left of it until ctx ends;
// when the lease is lost the handler's context is cancelled. A heartbeat that
// fails without saying anything about the lease (the database was unreachable
// for a moment) leaves the lease valid until it expires: it is tried again
// sooner, and only the lease's end cancels the handler. It returns the
// lease's end as the last heartbeat stored it.
func (e *Engine) heartbeat(ctx context.Context, cancel context.CancelCauseFunc, t Task) time.Time {
	for {
		wait := time.Until(t.LeaseUntil) / 3
		if wait < 10*time.Millisecond {
			wait = 10 * time.Millisecond
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return t.LeaseUntil
		case <-timer.C:
		}
		// A renewal that ends after the lease is no use: bound it by the lease.
		hctx, hcancel := context.WithTimeout(ctx, t.LeaseUntil.Sub(e.now()))
		until, err := e.Heartbeat(hctx, t.ID, t.Lease, e.lease)
		hcancel()
		if err != nil {
			if ctx.Err() != nil {
				return t.LeaseUntil
			}
			fenced := errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrNotRunning) || errors.Is(err, store.ErrNotFound)
			if fenced || !e.now().Before(t.LeaseUntil) {
				cancel(fmt.Errorf("lost the lease: %w", err))
				return t.LeaseUntil
			}
			e.log.Warn("heartbeat failed; the lease is still valid, trying again",
				"task", t.ID, "workflow", t.WorkflowID, "step", t.Step, "err", err, "lease_until", t.LeaseUntil)
			continue
		}
		if !until.After(t.LeaseUntil) {
			// The attempt deadline caps the lease: let the handler run until then.
			select {
			case <-ctx.Done():
			case <-time.After(time.Until(until)):
				cancel(errors.New("attempt timed out"))
			}
			return until
		}
		t.LeaseUntil = until
	}
}

// run executes the attempt: a timer completes, an http step makes its
// request, a task step calls its handler.
func (e *Engine) run(ctx context.Context, t Task) (json.RawMessage, error) {
	switch t.Handler {
	case store.QueueSleep, store.QueueTick:
		return json.RawMessage("null"), nil
	case store.QueueHTTP:
		return e.runHTTP(ctx, t)
	case store.QueueSWCall:
		return e.runSWCall(ctx, t)
	case store.QueueSWEmit:
		return e.runSWEmit(ctx, t)
	}
	h, ok := e.handlers[t.Handler]
	if !ok {
		return nil, Permanent(fmt.Errorf("no handler %q on this node", t.Handler))
	}
	return safeCall(ctx, h, t)
}

// safeCall turns a handler's panic into a failed attempt.
func safeCall(ctx context.Context, h Handler, t Task) (out json.RawMessage, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("handler panicked: %v", v)
		}
	}()
	out, err = h(ctx, t)
	if err == nil && len(bytes.TrimSpace(out)) == 0 {
		out = json.RawMessage("null")
	}
	if err == nil && !json.Valid(out) {
		err = Permanent(errors.New("handler returned invalid JSON"))
	}
	return out, err
}

// maxResponseBody bounds what an http step keeps of a response.
const maxResponseBody = 1 << 20

// runHTTP performs an http step's request. 2xx completes the step with
// {"status", "body"} (body as JSON when it is JSON, else as a string); 408,
// 429, 5xx and transport errors are retried; other statuses fail the step.
func (e *Engine) runHTTP(ctx context.Context, t Task) (json.RawMessage, error) {
	var in rules.HTTPRequest
	if err := json.Unmarshal(t.Input, &in); err != nil {
		return nil, Permanent(fmt.Errorf("http step input: %w", err))
	}
	var body io.Reader
	if len(in.Body) > 0 {
		body = bytes.NewReader(in.Body)
	}
	req, err := http.NewRequestWithContext(ctx, in.Method, in.URL, body)
	if err != nil {
		return nil, Permanent(fmt.Errorf("http step request: %w", err))
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range in.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Idempotency-Key", t.IdempotencyKey)
	e.injectTrace(ctx, req.Header)
	res, err := e.http.Do(req)
	if refused := outbound.Refused(err, req.Method, in.URL); refused != nil {
		// The operator's policy, not a passing failure: retrying cannot help.
		return nil, Permanent(fmt.Errorf("http step: %w", refused))
	}
	if err != nil {
		return nil, fmt.Errorf("http step: %w", err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, maxResponseBody))
	if err != nil {
		return nil, fmt.Errorf("http step: reading the response: %w", err)
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		err := fmt.Errorf("http step: %s %s answered %s: %s", in.Method, in.URL, res.Status, strings.TrimSpace(string(raw[:min(len(raw), 200)])))
		if res.StatusCode == http.StatusRequestTimeout || res.StatusCode == http.StatusTooManyRequests || res.StatusCode >= 500 {
			return nil, err
		}
		return nil, Permanent(err)
	}
	out := struct {
		Status int             `json:"status"`
		Body   json.RawMessage `json:"body"`
	}{Status: res.StatusCode, Body: json.RawMessage("null")}
	if t := bytes.TrimSpace(raw); len(t) > 0 {
		if json.Valid(t) {
			out.Body = t
		} else if out.Body, err = json.Marshal(string(raw)); err != nil {
			return nil, err
		}
	}
	return json.Marshal(out)
}
