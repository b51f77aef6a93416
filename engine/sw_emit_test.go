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
	ev, err := st.OldestEvent(ctx, (&store.Event{Name: "com.example.paid", Key: "o-1"}).Queue(), time.Time{})
	if err != nil || ev.ID != "wf-1-sw-3" || string(ev.Data) != `{"amount":3}` {
		t.Fatalf("stored event %+v, %v", ev, err)
	}
	if later, err := st.OldestEvent(ctx, ev.Queue(), ev.CreatedAt.Add(time.Microsecond)); err == nil {
		t.Errorf("a second event was stored: %+v", later)
	}
}
