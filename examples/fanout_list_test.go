package examples

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/worker"
	"github.com/flowd/flowd/workflow"
)

// examples/fanout-list.yaml end to end on a server whose in-process workers
// run the demo's echo handler: every image is resized (echoed) once, and
// publish gets the thumbnails in the order of the list.
func TestFanoutListExample(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := exampleServer(t, worker.Echo, "fanout-list")
	images := make([]string, 20)
	for i := range images {
		images[i] = fmt.Sprintf("img-%02d.png", i)
	}
	input, _ := json.Marshal(map[string]any{"album": "summer", "images": images})
	inst, err := c.CreateWorkflow(ctx, api.CreateWorkflowRequest{Definition: "fanout-list", Input: input})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); inst.Status != workflow.StatusCompleted; {
		if time.Now().After(deadline) || inst.Status == workflow.StatusFailed {
			t.Fatalf("fanout-list is %s: %+v", inst.Status, inst.State.Steps)
		}
		time.Sleep(50 * time.Millisecond)
		if inst, err = c.GetWorkflow(ctx, inst.ID); err != nil {
			t.Fatal(err)
		}
	}
	var published struct {
		Album      string `json:"album"`
		Thumbnails []struct {
			Image    string `json:"image"`
			Position int    `json:"position"`
			Width    int    `json:"width"`
		} `json:"thumbnails"`
	}
	if err := json.Unmarshal(inst.State.Steps["publish"].Output, &published); err != nil {
		t.Fatal(err)
	}
	if published.Album != "summer" || len(published.Thumbnails) != len(images) {
		t.Fatalf("published %+v", published)
	}
	for i, th := range published.Thumbnails {
		if th.Image != images[i] || th.Position != i || th.Width != 320 {
			t.Errorf("thumbnail %d is %+v, want %s at position %d", i, th, images[i], i)
		}
	}
}
