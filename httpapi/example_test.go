package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http/httptest"

	"github.com/flowd/flowd/httpapi"
	"github.com/flowd/flowd/store/sqlite"
	"github.com/flowd/flowd/workflow"
)

// exampleServer runs a real API server over an in-memory database, standing
// in for `flowd serve` in the examples.
func exampleServer() (url string, stop func()) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, "sqlite::memory:", sqlite.Options{})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := st.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	api, err := httpapi.NewServer(httpapi.Config{Store: st})
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(api)
	return srv.URL, func() { srv.Close(); st.Close() }
}

// A workflow's state is changed with a merge patch sent with If-Match of the
// version read: a write based on an outdated read is refused (412).
func Example() {
	url, stop := exampleServer()
	defer stop()
	ctx := context.Background()

	c := httpapi.NewClient(url) // httpapi.WithToken(…) when the server requires tokens
	inst, err := c.CreateWorkflow(ctx, httpapi.CreateWorkflowRequest{
		ID: "order-1", State: json.RawMessage(`{"variables": {"items": 2}}`),
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("created at version", inst.Version, "ETag", httpapi.ETag(inst.Version))

	inst, err = c.PatchWorkflowAt(ctx, "order-1", inst.Version, json.RawMessage(`{"variables": {"paid": true}}`))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("patched to version", inst.Version)

	// Version 0 is stale now.
	_, err = c.PatchWorkflowAt(ctx, "order-1", 0, json.RawMessage(`{"variables": {"paid": false}}`))
	fmt.Println("stale write refused:", errors.Is(err, httpapi.ErrPreconditionFailed))

	_, err = c.GetWorkflow(ctx, "no-such-order")
	var apiErr *httpapi.APIError
	if errors.As(err, &apiErr) && errors.Is(err, httpapi.ErrNotFound) {
		fmt.Println(apiErr.StatusCode, apiErr.Message)
	}
	// Output:
	// created at version 0 ETag "0"
	// patched to version 1
	// stale write refused: true
	// 404 workflow "no-such-order": not found
}

// UpdateWorkflow retries a read-modify-write until no other writer came in
// between: here a counter that concurrent clients may increment.
func ExampleClient_UpdateWorkflow() {
	url, stop := exampleServer()
	defer stop()
	ctx := context.Background()
	c := httpapi.NewClient(url)
	if _, err := c.CreateWorkflow(ctx, httpapi.CreateWorkflowRequest{ID: "counter", State: json.RawMessage(`{"variables": {"n": 41}}`)}); err != nil {
		log.Fatal(err)
	}

	inst, err := c.UpdateWorkflow(ctx, "counter", httpapi.RetryPolicy{MaxAttempts: 5},
		func(inst *workflow.Instance) (json.RawMessage, error) {
			var n int
			if _, err := inst.State.Var("n", &n); err != nil {
				return nil, err
			}
			return json.Marshal(map[string]any{"variables": map[string]int{"n": n + 1}})
		})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("n = %s at version %d\n", inst.State.Variables["n"], inst.Version)
	// Output: n = 42 at version 1
}

// GetWorkflowIfChanged re-reads an instance only when its version moved on.
func ExampleClient_GetWorkflowIfChanged() {
	url, stop := exampleServer()
	defer stop()
	ctx := context.Background()
	c := httpapi.NewClient(url)
	inst, err := c.CreateWorkflow(ctx, httpapi.CreateWorkflowRequest{ID: "w"})
	if err != nil {
		log.Fatal(err)
	}
	_, changed, err := c.GetWorkflowIfChanged(ctx, "w", inst.Version)
	fmt.Println("changed:", changed, err)
	// Output: changed: false <nil>
}
