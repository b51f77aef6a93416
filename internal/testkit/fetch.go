package testkit

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/client"
	"github.com/flowd/flowd/workflow"
)

// FetchDefinition is an http step whose URL the start's input gives (the
// shape of a server-side request forgery): what the outbound policy's tests
// start against a server. A refused call must fail it for good although its
// retry policy allows three attempts.
const FetchDefinition = `{"name": "fetch", "steps": [{"id": "call", "type": "http",
  "request": {"method": "GET", "url": "{{ .input.url }}"}, "retry": {"max_attempts": 3, "initial_backoff": "10ms"}}]}`

// Fetch stores FetchDefinition on the server c talks to, starts it with url
// and waits (at most 10s) until it completes or fails.
func Fetch(t testing.TB, c *client.Client, url string) *workflow.Instance {
	t.Helper()
	ctx := context.Background()
	if _, _, err := c.PutDefinition(ctx, "fetch", []byte(FetchDefinition)); err != nil {
		t.Fatal(err)
	}
	input, _ := json.Marshal(map[string]string{"url": url})
	inst, err := c.CreateWorkflow(ctx, api.CreateWorkflowRequest{Definition: "fetch", Input: input})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if inst, err = c.GetWorkflow(ctx, inst.ID); err != nil {
			t.Fatal(err)
		}
		if inst.Status == workflow.StatusCompleted || inst.Status == workflow.StatusFailed {
			return inst
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still %s: %+v", inst.ID, inst.Status, inst.State.Steps)
		}
	}
}
