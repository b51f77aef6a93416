package engine

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/flowd/flowd/engine/rules"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/store/sqlite"
)

// An emit task delivered again after its worker was lost publishes its
// event once: the event's id is the CloudEvent's, and the second run finds
// it stored and completes with the same output.
func TestEmitPublishesOnceWhenRunAgain(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, "sqlite:"+t.TempDir()+"/flowd.db", sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	none := 0
	e, err := New(Config{Store: st, Workers: &none})
	if err != nil {
		t.Fatal(err)
	}
	input := json.RawMessage(`{"id":"wf-1-sw-3","specversion":"1.0","time":"2026-11-26T07:00:00Z","source":"https://example.com","type":"com.example.paid","subject":"o-1","data":{"amount":3}}`)
	task := Task{ID: "t-1", Handler: store.QueueSWEmit, Input: input}
	for run := 1; run <= 2; run++ {
		out, err := e.runSWEmit(ctx, task)
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		var res rules.SWCallResult
		if err := json.Unmarshal(out, &res); err != nil || res.Error != nil || string(res.Output) != string(input) {
			t.Fatalf("run %d: %s (%v)", run, out, err)
		}
	}
	stored, err := st.Due(ctx, store.DueParams{Kind: store.DueEvent, Queue: (&store.Event{Name: "com.example.paid", Key: "o-1"}).Queue(), Limit: 1})
	if err != nil || len(stored) != 1 || stored[0].Event.ID != "wf-1-sw-3" || string(stored[0].Event.Data) != `{"amount":3}` {
		t.Fatalf("stored events %+v, %v", stored, err)
	}
	ev := stored[0].Event
	if later, err := st.Due(ctx, store.DueParams{Kind: store.DueEvent, Queue: ev.Queue(), Since: ev.CreatedAt.Add(time.Microsecond), Limit: 1}); err != nil || len(later) != 0 {
		t.Errorf("a second event was stored: %+v, %v", later, err)
	}
}
