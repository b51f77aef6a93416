package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/workflow/instance"
)

// RerunWorkflow starts a new instance that re-runs the finished instance
// id from req.From (a step of a flowd definition) or req.FromSeq (a code
// workflow's journal seq), and returns it. Errors: 400 unknown step (the
// message lists the steps) or a start that does not fit the workflow, 404
// unknown instance, 409 the instance has not finished, is free-form, or its
// definition revision was deleted.
func (c *Client) RerunWorkflow(ctx context.Context, id string, req api.RerunRequest) (*instance.Instance, error) {
	if id == "" {
		return nil, errors.New("flowd client: RerunWorkflow: the workflow id is empty")
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("flowd client: encoding rerun request: %w", err)
	}
	return c.instance(ctx, http.MethodPost, workflowPath(id)+"/rerun", nil, body, "application/json")
}
