package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// A bulk filter by search attribute and creation time matches what a list
// with the same filter shows: the instances of customer 42 created after
// a point, and no other; an attribute stored as a number matches its text.
func TestBulkBySearchAndTime(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		nd := newNode(t, b, b.newDB(t), nodeOpts{workers: -1, noStart: true})
		nd.define(bulkWaitDef)
		start := func(id, customer string) {
			t.Helper()
			if _, err := nd.eng.StartWorkflow(ctx, engine.StartParams{ID: id, Definition: "waiter",
				Search: map[string]json.RawMessage{"customer": json.RawMessage(customer)}}); err != nil {
				t.Fatal(err)
			}
		}
		// early-*: before the bound; late-*: after it. Customer 42 is a
		// number on some, the string "42" on others: both match "42".
		for i := range 5 {
			start(fmt.Sprintf("early-%d", i), "42")
		}
		time.Sleep(5 * time.Millisecond)
		bound := time.Now()
		time.Sleep(5 * time.Millisecond)
		var want []string
		for i := range 30 {
			id, customer := fmt.Sprintf("late-%d", i), `"43"`
			switch i % 3 {
			case 0:
				customer = "42"
			case 1:
				customer = `"42"`
			}
			start(id, customer)
			if i%3 != 2 {
				want = append(want, id)
			}
		}
		filter := store.BulkFilter{Search: map[string]string{"customer": "42"}, CreatedAfter: &bound}
		page, err := nd.st.List(ctx, filter.ListParams(time.Now()))
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Instances) != len(want) {
			t.Fatalf("list by the filter: %d instances, want %d", len(page.Instances), len(want))
		}
		op := nd.createBulk(engine.BulkParams{Action: "cancel", Filter: filter})
		checkCounts(t, nd.workBulk(op.ID), store.BulkDone, len(want), len(want), 0, 0)
		cancelled := map[string]bool{}
		for _, id := range want {
			cancelled[id] = true
		}
		for _, prefix := range []string{"early-", "late-"} {
			page, err := nd.st.List(ctx, store.ListParams{IDPrefix: prefix, Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			for _, inst := range page.Instances {
				wantStatus := workflow.StatusRunning
				if cancelled[inst.ID] {
					wantStatus = workflow.StatusCancelled
				}
				if inst.Status != wantStatus {
					t.Errorf("%s (customer %s) is %s, want %s", inst.ID, inst.Search["customer"], inst.Status, wantStatus)
				}
			}
		}
	})
}

// A re-run keeps the original's search attributes, so that a list by them
// finds both.
func TestRerunKeepsSearchAttributes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		nd := newNode(t, b, b.newDB(t), nodeOpts{workers: -1, noStart: true})
		nd.define(bulkWaitDef)
		if _, err := nd.eng.StartWorkflow(ctx, engine.StartParams{ID: "orig", Definition: "waiter",
			Search: map[string]json.RawMessage{"customer": json.RawMessage(`"acme"`)}}); err != nil {
			t.Fatal(err)
		}
		if _, err := nd.eng.Action(ctx, "orig", "cancel"); err != nil {
			t.Fatal(err)
		}
		again, err := nd.eng.Rerun(ctx, engine.RerunParams{ID: "orig", From: "a", NewID: "again"})
		if err != nil {
			t.Fatal(err)
		}
		if again.RerunOf != "orig" || string(again.Search["customer"]) != `"acme"` {
			t.Errorf("re-run: rerun_of %q, search %s", again.RerunOf, again.Search)
		}
		page, err := nd.st.List(ctx, store.ListParams{Search: map[string]string{"customer": "acme"}})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, inst := range page.Instances {
			ids = append(ids, inst.ID)
		}
		if fmt.Sprint(ids) != "[again orig]" {
			t.Errorf("list by customer acme: %v, want [again orig]", ids)
		}
	})
}

// The sweeper deletes a bulk operation once it has ended more than
// store.BulkRetention ago, never before, and never a RUNNING one.
func TestSweepDeletesEndedBulk(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		clock := &manualClock{now: time.Date(2026, 11, 25, 6, 0, 0, 0, time.UTC)}
		st := openAtClock(t, b, b.newDB(t), clock.Now)
		none := 0
		eng, err := engine.New(engine.Config{Store: st, Workers: &none, Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		ended, err := eng.CreateBulk(ctx, engine.BulkParams{Action: "cancel", Filter: store.BulkFilter{Definition: "none"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := eng.WorkBulk(ctx); err != nil {
			t.Fatal(err)
		}
		running := &store.BulkOperation{ID: "still-running", Action: "cancel", Status: store.BulkRunning,
			Filter: store.BulkFilter{Definition: "none"}, LeaseOwner: "elsewhere", LeaseUntil: clock.Now().Add(30 * 24 * time.Hour)}
		if _, err := st.PutBulk(ctx, running, 0); err != nil {
			t.Fatal(err)
		}
		exists := func(id string) bool {
			t.Helper()
			_, err := eng.GetBulk(ctx, id)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				t.Fatal(err)
			}
			return err == nil
		}
		clock.Advance(store.BulkRetention - time.Minute)
		if err := eng.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		if !exists(ended.ID) {
			t.Fatal("an operation that ended less than BulkRetention ago was deleted")
		}
		clock.Advance(2 * time.Minute)
		if err := eng.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		if exists(ended.ID) || !exists("still-running") {
			t.Errorf("after BulkRetention: ended kept %v, running kept %v; want false, true", exists(ended.ID), exists("still-running"))
		}
	})
}
