package apitest

import (
	"slices"
	"testing"

	"github.com/flowd/flowd/httpapi"
)

// actorsOf returns the actor of each version of workflow id, version 0
// first.
func (a *api) actorsOf(t *testing.T, id string) []string {
	t.Helper()
	r := a.do("GET", "/v1/workflows/"+id+"/history", "")
	expect(t, r, 200, "history of "+id)
	var h httpapi.HistoryResponse
	r.json(t, &h)
	out := make([]string, len(h.Versions))
	for i, v := range h.Versions {
		out[i] = v.Actor
	}
	return out
}

// testActors: every version in a history names its actor, the name of
// the token whose request wrote it; a server without tokens records
// "anonymous".
func testActors(t *testing.T, newServer NewServer) {
	a := &api{t: t, url: newServer(t, "act-admin admin root", "act-ops operator ops-alice", "act-worker worker billing")}
	a.token = "act-admin"
	expect(t, a.do("PUT", "/v1/definitions/actors", `{"name": "actors", "steps": [{"id": "a", "type": "task", "handler": "remote-actor"}]}`), 201, "definition")

	// An operator starts a workflow and acts on a free-form one.
	a.token = "act-ops"
	expect(t, a.do("POST", "/v1/workflows", `{"id": "act-1", "definition": "actors"}`), 201, "start")
	a.create("act-free", `{"variables": {"n": 1}}`)
	expect(t, a.do("PATCH", "/v1/workflows/act-free", `{"variables": {"n": 2}}`, "If-Match", `"0"`, "Content-Type", "application/merge-patch+json"), 200, "patch")
	expect(t, a.do("POST", "/v1/workflows/act-free/status", `{"from": "PENDING", "to": "RUNNING"}`), 200, "start the free-form one")
	if got, want := a.actorsOf(t, "act-free"), []string{"ops-alice", "ops-alice", "ops-alice"}; !slices.Equal(got, want) {
		t.Errorf("actors of the operator's free-form workflow: %q, want %q", got, want)
	}

	// A worker takes the step and completes it.
	a.token = "act-worker"
	r := a.do("POST", "/v1/tasks/poll", `{"worker": "w1", "handlers": ["remote-actor"], "wait_seconds": 5}`)
	expect(t, r, 200, "poll")
	var task httpapi.TaskResponse
	r.json(t, &task)
	expect(t, a.do("POST", "/v1/tasks/"+task.TaskID+"/complete", `{"lease": "`+task.Lease+`", "output": 1}`), 200, "complete")

	a.token = "act-admin"
	expect(t, a.do("POST", "/v1/workflows/act-free/pause", `{}`), 200, "pause as admin")
	got := a.actorsOf(t, "act-1")
	if len(got) < 2 || got[0] != "ops-alice" || !slices.Contains(got, "billing") {
		t.Errorf("actors of the started workflow: %q; want ops-alice first (the start), then billing (the worker's completion)", got)
	}
	for _, actor := range got {
		if actor != "ops-alice" && actor != "billing" && actor != "engine" {
			t.Errorf("actors of the started workflow: %q; %q is none of the start's, the worker's or the engine's", got, actor)
		}
	}
	if free := a.actorsOf(t, "act-free"); len(free) != 4 || free[3] == "" || free[3] == "ops-alice" || free[3] == "anonymous" {
		t.Errorf("the admin's pause: actors %q, want the admin token's default name last", free)
	}

	// Without tokens, nobody in particular.
	open := &api{t: t, url: newServer(t)}
	open.create("act-anon", "")
	if got := open.actorsOf(t, "act-anon"); !slices.Equal(got, []string{"anonymous"}) {
		t.Errorf("actors on a server without tokens: %q, want [anonymous]", got)
	}
}
