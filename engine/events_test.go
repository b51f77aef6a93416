package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/metrics"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// eventWorld is an engine without workers on a store of backend b, both on
// a manual clock: every delivery an event test checks is made by the call
// that publishes or starts waiting, never by a background loop.
type eventWorld struct {
	t     *testing.T
	st    store.Backend
	eng   *engine.Engine
	clock *manualClock
	m     *metrics.Metrics
}

func newEventWorld(t *testing.T, b backend, retention time.Duration) *eventWorld {
	t.Helper()
	clock := &manualClock{now: time.Date(2026, 11, 25, 6, 0, 0, 0, time.UTC)}
	st := openAtClock(t, b, b.newDB(t), clock.Now)
	none := 0
	m := metrics.New()
	eng, err := engine.New(engine.Config{Store: st, Workers: &none, Now: clock.Now, EventRetention: retention, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	w := &eventWorld{t: t, st: st, eng: eng, clock: clock, m: m}
	for _, def := range []string{paymentDef, `
name: late
steps:
  - {id: first, type: wait}
  - {id: paid, type: wait, event: payment, key: "{{ .input.order }}", depends_on: [first]}
`, `
name: twice
steps:
  - {id: a, type: wait, event: payment, key: "{{ .input.order }}"}
  - {id: b, type: wait, event: payment, key: "{{ .input.order }}"}
`} {
		if _, _, err := eng.PutDefinition(t.Context(), []byte(def)); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// paymentDef: an order waits for its payment, then for a shipment.
const paymentDef = `
name: payment
steps:
  - {id: paid, type: wait, event: payment, key: "{{ .input.order }}"}
  - {id: shipped, type: wait, depends_on: [paid]}
`

func (w *eventWorld) start(def, id, order string) *workflow.Instance {
	w.t.Helper()
	inst, err := w.eng.StartWorkflow(w.t.Context(), engine.StartParams{ID: id, Definition: def, Input: json.RawMessage(`{"order":"` + order + `"}`)})
	if err != nil {
		w.t.Fatal(err)
	}
	return inst
}

func (w *eventWorld) publish(name, key, data string) *engine.PublishedEvent {
	w.t.Helper()
	ev, err := w.eng.PublishEvent(w.t.Context(), name, key, json.RawMessage(data))
	if err != nil {
		w.t.Fatal(err)
	}
	return ev
}

func (w *eventWorld) step(id, step string) *workflow.StepState {
	w.t.Helper()
	inst, err := w.st.Get(w.t.Context(), id)
	if err != nil {
		w.t.Fatal(err)
	}
	return inst.State.Steps[step]
}

// wantStep checks a step's status and, when COMPLETED, its output.
func (w *eventWorld) wantStep(id, step string, status workflow.StepStatus, output string) {
	w.t.Helper()
	st := w.step(id, step)
	if st.Status != status || status == workflow.StepCompleted && string(st.Output) != output {
		w.t.Errorf("%s step %s = %s %s, want %s %s", id, step, st.Status, st.Output, status, output)
	}
}

// completeFirst completes the late definition's first step, so that its
// event step starts waiting.
func (w *eventWorld) completeFirst(id string) {
	w.t.Helper()
	if _, err := w.eng.CompleteStep(w.t.Context(), engine.CompleteStepParams{ID: id, Step: "first"}); err != nil {
		w.t.Fatal(err)
	}
}

// Publishing completes every step waiting for (name, key) — in every
// instance, two steps of one instance alike — with the event's data, each
// in its own version whose history cause names the event; other keys wait
// on, and an event completes a step at most once.
func TestEventPublishCompletesWaitingSteps(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		w := newEventWorld(t, b, 0)
		for _, id := range []string{"o1-a", "o1-b"} {
			if inst := w.start("payment", id, "o-1"); inst.State.Steps["paid"].Status != workflow.StepWaiting {
				t.Fatalf("%s: paid is %s, want WAITING", id, inst.State.Steps["paid"].Status)
			}
		}
		w.start("payment", "o2", "o-2")
		w.start("twice", "both", "o-1")
		var waiting struct{ Name, Key, ID string }
		if raw := w.step("o1-a", "paid").Extra["event"]; json.Unmarshal(raw, &waiting) != nil || waiting.Name != "payment" || waiting.Key != "o-1" || waiting.ID != "" {
			t.Errorf("state.steps.paid.event = %s, want the name and key it waits for", raw)
		}

		ev := w.publish("payment", "o-1", `{"amount":5}`)
		got := slices.Sorted(slices.Values(ev.Delivered))
		if want := []string{"both", "both", "o1-a", "o1-b"}; !slices.Equal(got, want) {
			t.Errorf("delivered = %v, want %v", got, want)
		}
		for _, id := range []string{"o1-a", "o1-b"} {
			w.wantStep(id, "paid", workflow.StepCompleted, `{"amount":5}`)
			w.wantStep(id, "shipped", workflow.StepWaiting, "")
			inst, _ := w.st.Get(t.Context(), id)
			h, err := w.st.History(t.Context(), id, inst.Version, 0)
			if err != nil || len(h) != 1 || !strings.Contains(h[0].Cause, `event "payment" (`+ev.Event.ID+`)`) {
				t.Errorf("%s: history cause of the delivery = %+v, %v", id, h, err)
			}
		}
		w.wantStep("both", "a", workflow.StepCompleted, `{"amount":5}`)
		w.wantStep("both", "b", workflow.StepCompleted, `{"amount":5}`)
		if inst, _ := w.st.Get(t.Context(), "both"); inst.Status != workflow.StatusCompleted || inst.Version != 2 {
			t.Errorf("both: %s at version %d, want COMPLETED at 2 (one version per step)", inst.Status, inst.Version)
		}
		w.wantStep("o2", "paid", workflow.StepWaiting, "")

		// The same (name, key) again completes nothing: the steps took one.
		if again := w.publish("payment", "o-1", `2`); len(again.Delivered) != 0 {
			t.Errorf("second event delivered to %v, want nobody", again.Delivered)
		}
		w.wantStep("o1-a", "paid", workflow.StepCompleted, `{"amount":5}`)
		// No data is null.
		if ev := w.publish("payment", "o-2", ""); !slices.Equal(ev.Delivered, []string{"o2"}) {
			t.Errorf("delivered = %v, want [o2]", ev.Delivered)
		}
		w.wantStep("o2", "paid", workflow.StepCompleted, `null`)
		if p, d := counterValue(t, w.m, "flowd_events_published_total"), counterValue(t, w.m, "flowd_events_delivered_total"); p != 3 || d != 5 {
			t.Errorf("flowd_events_published_total %v, flowd_events_delivered_total %v; want 3 and 5", p, d)
		}
	})
}

// A step that starts waiting takes the oldest event published since its
// instance was created; an event older than the instance is not taken.
func TestLateWaiterTakesTheOldestEvent(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		w := newEventWorld(t, b, 0)
		w.publish("payment", "o-1", `"before"`)
		w.clock.Advance(time.Second)
		w.start("late", "late", "o-1")
		w.clock.Advance(time.Second)
		first := w.publish("payment", "o-1", `"first"`)
		w.clock.Advance(time.Second)
		w.publish("payment", "o-1", `"second"`)
		if len(first.Delivered) != 0 {
			t.Errorf("delivered to %v while nobody waited", first.Delivered)
		}
		w.completeFirst("late")
		w.wantStep("late", "paid", workflow.StepCompleted, `"first"`)
		if ev := w.step("late", "paid").Extra["event"]; !strings.Contains(string(ev), first.Event.ID) {
			t.Errorf("state.steps.paid.event = %s, want the id of the first event", ev)
		}

		// Published before the instance was created: not taken.
		w.clock.Advance(time.Second)
		w.start("payment", "newer", "o-1")
		w.wantStep("newer", "paid", workflow.StepWaiting, "")
	})
}

// An event older than the event retention is not taken, and the sweeper
// deletes it.
func TestExpiredEventIsNotTaken(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		w := newEventWorld(t, b, time.Hour)
		w.start("late", "late", "o-1")
		w.clock.Advance(time.Minute)
		ev := w.publish("payment", "o-1", `1`)
		w.clock.Advance(time.Hour + time.Microsecond)
		w.completeFirst("late")
		w.wantStep("late", "paid", workflow.StepWaiting, "")
		if err := w.eng.Sweep(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got, err := oldestEvent(t.Context(), w.st, ev.Event.Queue(), time.Time{}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("expired event after a sweep = %+v, %v; want it deleted", got, err)
		}
		if n := counterValue(t, w.m, "flowd_events_expired_total"); n != 1 {
			t.Errorf("flowd_events_expired_total = %v, want 1", n)
		}
		w.wantStep("late", "paid", workflow.StepWaiting, "")
		// Within the retention it is taken.
		w.start("late", "late2", "o-2")
		w.publish("payment", "o-2", `2`)
		w.clock.Advance(59 * time.Minute)
		w.completeFirst("late2")
		w.wantStep("late2", "paid", workflow.StepCompleted, `2`)
	})
}

// The sweeper delivers a stored event to a step that waits for it when
// nobody looked it up (its node died between its commit and its look-up).
func TestSweeperDeliversEventsMissedByADeadNode(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		w := newEventWorld(t, b, 0)
		w.start("payment", "p", "o-1")
		// Stored without the publish's delivery, as a node that died would.
		if err := w.st.PublishEvent(t.Context(), &store.Event{Name: "payment", Key: "o-1", Data: json.RawMessage(`7`)}); err != nil {
			t.Fatal(err)
		}
		if err := w.eng.Sweep(t.Context()); err != nil {
			t.Fatal(err)
		}
		w.wantStep("p", "paid", workflow.StepWaiting, "") // still the waiter's to look up
		w.clock.Advance(time.Minute)
		if err := w.eng.Sweep(t.Context()); err != nil {
			t.Fatal(err)
		}
		w.wantStep("p", "paid", workflow.StepCompleted, `7`)
	})
}

// A waiting event step may still be completed from outside; then, and once
// its instance stopped, an event completes nothing.
func TestEventStepCompletedOtherwise(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		w := newEventWorld(t, b, 0)
		w.start("payment", "manual", "o-1")
		w.start("payment", "cancelled", "o-1")
		if _, err := w.eng.CompleteStep(t.Context(), engine.CompleteStepParams{ID: "manual", Step: "paid", Output: json.RawMessage(`"by hand"`)}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.eng.Action(t.Context(), "cancelled", "cancel"); err != nil {
			t.Fatal(err)
		}
		if ev := w.publish("payment", "o-1", `1`); len(ev.Delivered) != 0 {
			t.Errorf("delivered to %v, want nobody", ev.Delivered)
		}
		w.wantStep("manual", "paid", workflow.StepCompleted, `"by hand"`)
		w.wantStep("cancelled", "paid", workflow.StepCancelled, "")
	})
}

// A paused instance's waiting step takes its event, as wait steps take
// completions while paused; what follows waits for the resume.
func TestEventDeliveredWhilePaused(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		w := newEventWorld(t, b, 0)
		w.start("payment", "p", "o-1")
		if _, err := w.eng.Action(t.Context(), "p", "pause"); err != nil {
			t.Fatal(err)
		}
		if ev := w.publish("payment", "o-1", `1`); !slices.Equal(ev.Delivered, []string{"p"}) {
			t.Errorf("delivered = %v, want [p]", ev.Delivered)
		}
		w.wantStep("p", "paid", workflow.StepCompleted, `1`)
		w.wantStep("p", "shipped", workflow.StepPending, "")
	})
}

// What PublishEvent refuses, before storing anything.
func TestPublishEventRefusesBadInput(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		w := newEventWorld(t, b, 0)
		for _, c := range []struct{ name, key, data, want string }{
			{"", "", "", "name is required"},
			{"a/b", "", "", "outside [A-Za-z0-9._:-]"},
			{strings.Repeat("n", 129), "", "", "longer than 128"},
			{"ok", strings.Repeat("k", 257), "", "key is longer than 256"},
			{"ok", "", "{", "not JSON"},
		} {
			_, err := w.eng.PublishEvent(context.Background(), c.name, c.key, json.RawMessage(c.data))
			if !errors.Is(err, store.ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("PublishEvent(%.10q, %.10q, %q) = %v, want ErrInvalidArgument with %q", c.name, c.key, c.data, err, c.want)
			}
		}
		if _, err := engine.New(engine.Config{Store: w.st, EventRetention: -time.Second}); err == nil {
			t.Errorf("a negative event retention was accepted")
		}
	})
}

// A step that starts waiting on resume — by the action or by a batch to
// RUNNING — takes the event published while its workflow was paused.
func TestStepWaitingOnResumeTakesTheEvent(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		w := newEventWorld(t, b, 0)
		for _, id := range []string{"by-action", "by-batch"} {
			w.start("late", id, id)
			if _, err := w.eng.Action(t.Context(), id, "pause"); err != nil {
				t.Fatal(err)
			}
			w.completeFirst(id) // recorded; paid waits for the resume
			w.wantStep(id, "paid", workflow.StepPending, "")
			if ev := w.publish("payment", id, `"`+id+`"`); len(ev.Delivered) != 0 {
				t.Errorf("delivered to %v while paused and not waiting", ev.Delivered)
			}
		}
		if _, err := w.eng.Action(t.Context(), "by-action", "resume"); err != nil {
			t.Fatal(err)
		}
		w.wantStep("by-action", "paid", workflow.StepCompleted, `"by-action"`)
		w.clock.Advance(time.Second)
		ids, err := w.eng.BatchStatus(t.Context(), store.BatchStatusParams{Status: workflow.StatusPaused, UpdatedBefore: w.clock.Now(), NewStatus: workflow.StatusRunning, Limit: 10})
		if err != nil || !slices.Equal(ids, []string{"by-batch"}) {
			t.Fatalf("BatchStatus = %v, %v", ids, err)
		}
		w.wantStep("by-batch", "paid", workflow.StepCompleted, `"by-batch"`)
	})
}

// oldestEvent reads the oldest event of queue created at or after since
// (Due of store.DueEvent), or ErrNotFound.
func oldestEvent(ctx context.Context, st store.Querier, queue string, since time.Time) (*store.Event, error) {
	items, err := st.Due(ctx, store.DueParams{Kind: store.DueEvent, Queue: queue, Since: since, Limit: 1})
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("no event of queue %q: %w", queue, store.ErrNotFound)
	}
	return items[0].Event, nil
}
