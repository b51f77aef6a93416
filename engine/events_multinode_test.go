package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/workflow"
)

const orderPaymentDef = `
name: order-payment
steps:
  - {id: reserve, type: task, handler: work, input: {order: "{{ .input.order }}"}}
  - {id: paid, type: wait, event: payment, key: "{{ .steps.reserve.output.order }}", depends_on: [reserve]}
`

// An event published through node A completes a step waiting on an
// instance that node B runs (its worker ran the step before).
func TestEventAcrossNodes(t *testing.T) {
	b := postgresBackend(t)
	addr := b.newDB(t)
	nb := newNode(t, b, addr, nodeOpts{handlers: map[string]engine.Handler{"work": echo}})
	na := newNode(t, b, addr, nodeOpts{workers: -1, noStart: true})
	nb.define(orderPaymentDef)
	inst := nb.start("order-payment", "order-1", `{"order": "o-1"}`)
	deadline := time.Now().Add(10 * time.Second)
	for {
		cur, err := nb.st.Get(context.Background(), inst.ID)
		if err != nil {
			t.Fatal(err)
		}
		if cur.State.Steps["paid"].Status == workflow.StepWaiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("paid never WAITING: %+v", cur.State.Steps)
		}
		time.Sleep(20 * time.Millisecond)
	}
	ev, err := na.eng.PublishEvent(context.Background(), "payment", "o-1", json.RawMessage(`{"paid":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ev.Delivered, []string{"order-1"}) {
		t.Errorf("delivered = %v, want [order-1]", ev.Delivered)
	}
	// Completed before the publish returned: no waiting here.
	done, err := na.st.Get(context.Background(), inst.ID)
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != workflow.StatusCompleted || string(done.State.Steps["paid"].Output) != `{"paid":true}` {
		t.Errorf("after the publish: %s, paid %+v", done.Status, done.State.Steps["paid"])
	}
}

// A publish on node A at the same time as a step starting to wait on node
// B never loses the event: one of the two look-ups, each made after its
// own commit, sees the other's write. Neither node runs a sweeper, so the
// safety net cannot hide a miss, and every check is made once both calls
// have returned.
func TestEventPublishRacesAWaiter(t *testing.T) {
	b := postgresBackend(t)
	addr := b.newDB(t)
	na := newNode(t, b, addr, nodeOpts{workers: -1, noStart: true})
	nb := newNode(t, b, addr, nodeOpts{workers: -1, noStart: true})
	nb.define(`
name: late
steps:
  - {id: first, type: wait}
  - {id: paid, type: wait, event: payment, key: "{{ .input.order }}", depends_on: [first]}
`)
	ctx := context.Background()
	const rounds = 40
	for i := range rounds {
		id, key := fmt.Sprintf("race-%02d", i), fmt.Sprintf("k-%02d", i)
		nb.start("late", id, `{"order": "`+key+`"}`)
		var wg sync.WaitGroup
		var pubErr, waitErr error
		var delivered []string
		start := make(chan struct{})
		wg.Go(func() {
			<-start
			ev, err := na.eng.PublishEvent(ctx, "payment", key, json.RawMessage(fmt.Sprint(i)))
			if ev != nil {
				delivered = ev.Delivered
			}
			pubErr = err
		})
		wg.Go(func() {
			<-start
			_, waitErr = nb.eng.CompleteStep(ctx, engine.CompleteStepParams{ID: id, Step: "first"})
		})
		close(start)
		wg.Wait()
		if pubErr != nil || waitErr != nil {
			t.Fatalf("round %d: publish %v, complete %v", i, pubErr, waitErr)
		}
		inst, err := na.st.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if inst.Status != workflow.StatusCompleted || string(inst.State.Steps["paid"].Output) != fmt.Sprint(i) {
			t.Fatalf("round %d: %s is %s with paid %+v (delivered by the publish to %v): the event was lost", i, id, inst.Status, inst.State.Steps["paid"], delivered)
		}
		h, err := na.st.History(ctx, id, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		events := 0
		for _, e := range h {
			if strings.HasPrefix(e.Cause, `event "payment"`) {
				events++
			}
		}
		if events != 1 {
			t.Fatalf("round %d: %d versions caused by the event, want exactly 1", i, events)
		}
	}
}
