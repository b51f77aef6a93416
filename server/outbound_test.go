package server_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowd/flowd/internal/testkit"
	"github.com/flowd/flowd/server"
	"github.com/flowd/flowd/workflow"
)

// TestServerRefusesOutboundCallsByDefault: a program that embeds the
// server and opens nothing has http steps that cannot reach the server's
// own API (on loopback).
func TestServerRefusesOutboundCallsByDefault(t *testing.T) {
	t.Parallel()
	s := start(t, server.Config{DB: "sqlite:" + filepath.Join(t.TempDir(), "flowd.db")}, nil)
	inst := testkit.Fetch(t, s.Client(), s.URL()+"/v1/definitions")
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
	if inst := testkit.Fetch(t, s.Client(), s.URL()+"/healthz"); inst.Status != workflow.StatusCompleted {
		t.Errorf("opened loopback: %s %+v", inst.Status, inst.State.Steps["call"])
	}
	_, err := server.New(context.Background(), server.Config{DB: "sqlite::memory:", OutboundAllow: []string{"10.0.0.0/8", "api.internal:https"}})
	if want := `server: OutboundAllow: "api.internal:https": the port must be a number from 1 to 65535`; err == nil || err.Error() != want {
		t.Errorf("bad entry: %v, want %s", err, want)
	}
}
