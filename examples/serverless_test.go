package examples

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/server"
	"github.com/flowd/flowd/workflow"
)

// examples/serverless/ship-order.yaml runs on a real server: a paid order
// ships through its child workflow, a risky one is refused with the
// document's error, and an order whose fraud scorer fails is taken as low
// risk (the document's try/catch). Each order takes only the payment event
// of its own id.
func TestShipOrderExample(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, err := server.New(ctx, server.Config{DB: "sqlite:" + filepath.Join(t.TempDir(), "flowd.db"), Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	handlers := map[string]engine.Handler{
		"reserve-stock": func(_ context.Context, t engine.Task) (json.RawMessage, error) { return t.Input, nil },
		"fraud-score": func(_ context.Context, t engine.Task) (json.RawMessage, error) {
			var in struct{ Order string }
			if err := json.Unmarshal(t.Input, &in); err != nil {
				return nil, err
			}
			switch in.Order {
			case "o-risky":
				return json.RawMessage(`{"score": 95}`), nil
			case "o-flaky":
				return nil, errors.New("scorer unavailable")
			}
			return json.RawMessage(`{"score": 10}`), nil
		},
	}
	for name, h := range handlers {
		if err := srv.Register(name, h); err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	c := srv.Client()
	for _, name := range []string{"shipping", "ship-order"} {
		body, err := os.ReadFile(filepath.Join("serverless", name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.PutDefinition(ctx, name, body); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	for _, id := range []string{"o-1", "o-risky", "o-flaky"} {
		input := `{"id": "` + id + `", "sku": "A-1", "quantity": 2, "amount": 42}`
		if _, err := c.CreateWorkflow(ctx, api.CreateWorkflowRequest{ID: id, Definition: "ship-order", Input: json.RawMessage(input)}); err != nil {
			t.Fatal(err)
		}
	}
	refused := waitFor(t, c, "o-risky", func(inst *workflow.Instance) bool { return inst.Status == workflow.StatusFailed })
	var e struct{ Type, Title, Detail, Instance string }
	if err := json.Unmarshal(refused.Error, &e); err != nil || e.Type != "https://shop.example.com/errors/refused" || e.Detail != "fraud score 95" || e.Instance != "/do/3/refuse" {
		t.Errorf("the risky order's error: %s (%v)", refused.Error, err)
	}
	waiting := func(inst *workflow.Instance) bool {
		return strings.Contains(string(inst.State.Extra["sw"]), `"kind":"listen"`)
	}
	waitFor(t, c, "o-1", waiting)
	waitFor(t, c, "o-flaky", waiting)
	for _, id := range []string{"o-flaky", "o-1"} {
		pub, err := c.PublishEvent(ctx, "com.example.payment.received", id, json.RawMessage(`{"amount": 42}`))
		if err != nil {
			t.Fatal(err)
		}
		if len(pub.Delivered) != 1 || pub.Delivered[0] != id {
			t.Errorf("the payment of %s reached %v", id, pub.Delivered)
		}
		done := waitFor(t, c, id, func(inst *workflow.Instance) bool { return inst.Status == workflow.StatusCompleted })
		if want := `{"carrier":"standard","order":"` + id + `","paid":42}`; string(done.Output) != want {
			t.Errorf("%s output %s, want %s", id, done.Output, want)
		}
	}
}
