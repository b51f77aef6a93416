package server_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/httpapi"
	"github.com/flowd/flowd/server"
	"github.com/flowd/flowd/workflow"
)

const fetchDef = `{"name": "fetch", "steps": [{"id": "call", "type": "http",
  "request": {"method": "GET", "url": "{{ .input.url }}"}, "retry": {"max_attempts": 3, "initial_backoff": "10ms"}}]}`

// startFetch starts the fetch definition with url and waits for it to end.
func startFetch(t *testing.T, c *httpapi.Client, url string) *workflow.Instance {
	t.Helper()
	ctx := context.Background()
	if _, _, err := c.PutDefinition(ctx, "fetch", []byte(fetchDef)); err != nil {
		t.Fatal(err)
	}
	input, _ := json.Marshal(map[string]string{"url": url})
	inst, err := c.CreateWorkflow(ctx, httpapi.CreateWorkflowRequest{Definition: "fetch", Input: input})
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

// TestServerRefusesOutboundCallsByDefault: a program that embeds the
// server and opens nothing has http steps that cannot reach the server's
// own API (on loopback).
func TestServerRefusesOutboundCallsByDefault(t *testing.T) {
	t.Parallel()
	s := start(t, server.Config{DB: "sqlite:" + filepath.Join(t.TempDir(), "flowd.db")}, nil)
	inst := startFetch(t, s.Client(), s.URL()+"/v1/definitions")
	step := inst.State.Steps["call"]
	want := "http step: GET " + s.URL() + "/v1/definitions: outbound call refused: " + strings.TrimPrefix(s.URL(), "http://") +
		" is a loopback address; flowd serve --outbound-allow opens it"
	if inst.Status != workflow.StatusFailed || step.Error != want || step.Attempts != 1 {
		t.Errorf("%s, step %+v; want FAILED after one attempt with %q", inst.Status, step, want)
	}
}

func TestServerOutboundAllow(t *testing.T) {
	t.Parallel()
	s := start(t, server.Config{DB: "sqlite:" + filepath.Join(t.TempDir(), "flowd.db"), OutboundAllow: []string{"127.0.0.0/8"}}, nil)
	if inst := startFetch(t, s.Client(), s.URL()+"/healthz"); inst.Status != workflow.StatusCompleted {
		t.Errorf("opened loopback: %s %+v", inst.Status, inst.State.Steps["call"])
	}
	_, err := server.New(context.Background(), server.Config{DB: "sqlite::memory:", OutboundAllow: []string{"10.0.0.0/8", "api.internal:https"}})
	if want := `server: OutboundAllow: "api.internal:https": the port must be a number from 1 to 65535`; err == nil || err.Error() != want {
		t.Errorf("bad entry: %v, want %s", err, want)
	}
}
