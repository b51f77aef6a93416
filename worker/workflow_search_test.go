package worker_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/client"
	"github.com/flowd/flowd/worker"
	"github.com/flowd/flowd/workflow"
)

// A Go code workflow's ctx.search sets an instance's search attribute that
// a list finds; the replay of the next run sets it again without a new
// version; a value that is no string, number or boolean is an error the
// function sees.
func TestWorkflowSearch(t *testing.T) {
	b := setupServer(t, 1)
	var badErr error
	fn := worker.Func(func(wf *worker.WorkflowContext, in order) (string, error) {
		if err := wf.Search("customer", in.Order); err != nil {
			return "", err
		}
		if err := wf.Search("amount", 42); err != nil {
			return "", err
		}
		badErr = wf.Search("nested", map[string]int{"x": 1})
		if err := wf.Sleep("nap", 100*time.Millisecond); err != nil {
			return "", err
		}
		return "done", wf.Search("stage", "slept")
	})
	startWorker(t, worker.Config{Client: b.client, Workflows: map[string]worker.Workflow{"order": {Run: fn}}, Wait: time.Second})
	waitDefinition(t, b.client, "order")
	b.start(t, "order", "s-1", `{"order":"acme"}`)
	inst := b.waitStatus(t, "s-1", workflow.StatusCompleted, 15*time.Second)
	got, _ := json.Marshal(inst.Search)
	if string(got) != `{"amount":42,"customer":"acme","stage":"slept"}` {
		t.Errorf("search = %s", got)
	}
	var apiErr *client.APIError
	if !errors.As(badErr, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(badErr.Error(), "nested") {
		t.Errorf("ctx.search of an object = %v, want a 400 naming the attribute", badErr)
	}
	hist, err := b.client.History(t.Context(), "s-1")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, h := range hist {
		if strings.HasPrefix(h.Cause, "search attribute") {
			n++
		}
	}
	if n != 3 {
		t.Errorf("%d versions set search attributes, want 3 (customer and amount once, though the second run sets them again; stage)", n)
	}
	page, err := b.client.ListWorkflows(t.Context(), client.ListOptions{Search: map[string]string{"customer": "acme", "amount": "42"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Workflows) != 1 || page.Workflows[0].ID != "s-1" {
		t.Errorf("list by customer and amount = %+v, want s-1", page.Workflows)
	}
}
