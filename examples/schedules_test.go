package examples

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v2"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/client"
	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/workflow"
)

// readScheduleExample reads a schedule file of examples/schedules as
// `flowd schedule apply` does (strict YAML: the fields of
// PUT /v1/schedules/{name} and the name).
func readScheduleExample(t *testing.T, path string) (string, api.PutScheduleRequest) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Name          string         `yaml:"name"`
		Definition    string         `yaml:"definition"`
		Cron          string         `yaml:"cron"`
		Timezone      string         `yaml:"timezone"`
		Input         map[string]any `yaml:"input"`
		Overlap       string         `yaml:"overlap"`
		Paused        bool           `yaml:"paused"`
		CatchupWindow string         `yaml:"catchup_window"`
	}
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	in, err := json.Marshal(f.Input)
	if err != nil {
		t.Fatal(err)
	}
	return f.Name, api.PutScheduleRequest{Definition: f.Definition, Cron: f.Cron, Timezone: f.Timezone,
		Input: in, Overlap: f.Overlap, Paused: f.Paused, CatchupWindow: f.CatchupWindow}
}

// examples/schedules runs on a real server: the schedule fires at 02:30
// Paris time (its next fire times, whatever the season), a trigger starts
// the definition with the schedule's input and it completes, and a backfill
// over three November days starts one instance per day at 01:30 UTC.
func TestNightlyDigestScheduleExample(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := exampleServer(t, func(_ context.Context, t engine.Task) (json.RawMessage, error) { return t.Input, nil })
	body, err := os.ReadFile("schedules/daily-digest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.PutDefinition(ctx, "daily-digest", body); err != nil {
		t.Fatal(err)
	}
	name, req := readScheduleExample(t, "schedules/nightly-digest.schedule.yaml")
	s, created, err := c.PutSchedule(ctx, name, req)
	if err != nil {
		t.Fatal(err)
	}
	if !created || s.Name != "nightly-digest" || s.Overlap != "skip" || s.CatchupWindow != "10m0s" {
		t.Errorf("schedule %+v (created %v)", s, created)
	}
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.NextFireTimes) != 5 {
		t.Fatalf("next fire times %v, want 5", s.NextFireTimes)
	}
	for _, at := range s.NextFireTimes {
		if local := at.In(paris); local.Hour() != 2 || local.Minute() != 30 {
			t.Errorf("fire time %v is %v in Paris, want 02:30", at, local)
		}
	}

	inst, err := c.TriggerSchedule(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	done := waitDone(t, c, inst.ID)
	if done.Status != workflow.StatusCompleted {
		t.Fatalf("%s is %s: %+v", inst.ID, done.Status, done.State.Steps)
	}
	if got, want := string(done.State.Steps["send"].Output), `{"digest_of":"daily","to":"ops@example.com"}`; got != want {
		t.Errorf("send output %s, want %s", got, want)
	}

	res, err := c.BackfillSchedule(ctx, name, time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 3, 12, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"nightly-digest-20261101T013000Z", "nightly-digest-20261102T013000Z", "nightly-digest-20261103T013000Z"}
	if !slices.Equal(res.Created, want) || len(res.Existing) != 0 {
		t.Fatalf("backfill created %v, existing %v; want %v", res.Created, res.Existing, want)
	}
	for _, id := range want {
		if got := waitDone(t, c, id); got.Status != workflow.StatusCompleted {
			t.Errorf("%s is %s", id, got.Status)
		}
	}
}

// waitDone polls the instance id until it leaves PENDING and RUNNING (or 30
// seconds pass) and returns it.
func waitDone(t *testing.T, c *client.Client, id string) *workflow.Instance {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		inst, err := c.GetWorkflow(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if inst.Status != workflow.StatusPending && inst.Status != workflow.StatusRunning || time.Now().After(deadline) {
			return inst
		}
	}
}
