package client

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/flowd/flowd/api"
)

// Checkpoint records step name of the code workflow run holding lease on
// taskID: req carries its output, or its error after its attempts. The
// answer is the entry recorded — by this call, or by an earlier one (first
// write wins), in which case the run must use it. Errors: 409 (IsConflict)
// the run no longer holds its lease, or the name was recorded with another
// kind (the workflow failed for good).
func (c *Client) Checkpoint(ctx context.Context, taskID, name string, req api.CheckpointRequest) (*api.JournalEntry, error) {
	if len(req.Output) > 0 && !json.Valid(req.Output) {
		return nil, errors.New("flowd client: Checkpoint: output is not valid JSON")
	}
	var out api.JournalEntry
	if err := c.taskCall(ctx, taskID, "steps/"+pathSegment(name), req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Suspend ends the code workflow run holding lease on taskID waiting for
// waits, by name; the first of them to finish queues the next run.
// Errors as for Checkpoint.
func (c *Client) Suspend(ctx context.Context, taskID, lease string, waits map[string]api.Wait) error {
	return c.taskCall(ctx, taskID, "suspend", api.SuspendRequest{Lease: lease, Waits: waits}, nil)
}

// SetVariable is a code workflow's ctx.set: state.variables.KEY = value,
// while the run holding lease on taskID holds it. Errors as for
// Checkpoint.
func (c *Client) SetVariable(ctx context.Context, taskID, lease, key string, value json.RawMessage) error {
	if !json.Valid(value) {
		return errors.New("flowd client: SetVariable: value is not valid JSON")
	}
	return c.taskCall(ctx, taskID, "variables/"+pathSegment(key), api.SetVariableRequest{Lease: lease, Value: value}, nil)
}

// SetSearch is a code workflow's ctx.search: the instance's search
// attribute NAME = value (a string, a number or a boolean), written while
// the run holds lease. 400 for a bad name or value, 409 when the run no
// longer holds its lease.
func (c *Client) SetSearch(ctx context.Context, taskID, lease, name string, value json.RawMessage) error {
	if !json.Valid(value) {
		return errors.New("flowd client: SetSearch: value is not valid JSON")
	}
	return c.taskCall(ctx, taskID, "search/"+pathSegment(name), api.SetSearchRequest{Lease: lease, Value: value}, nil)
}
