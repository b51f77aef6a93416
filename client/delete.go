package client

import (
	"context"
	"errors"
	"net/http"

	"github.com/flowd/flowd/api"
)

// DeleteWorkflow deletes a finished instance (COMPLETED, FAILED, CANCELLED
// or TIMED_OUT) with its history and tasks, and its child workflows (at
// any depth) with theirs. ifMatch is the raw If-Match
// value, as for PatchWorkflow: api.ETag(version) such as `"3"`, or `*` for any
// version; "" sends none (the server answers 428). Errors: 428, 400
// malformed If-Match, 404 (ErrNotFound), 409 the instance or one of its
// child workflows is not finished (ErrConflict), 412 stale version (ErrPreconditionFailed).
func (c *Client) DeleteWorkflow(ctx context.Context, id, ifMatch string) error {
	if id == "" {
		return errors.New("flowd client: DeleteWorkflow: the workflow id is empty")
	}
	_, err := c.do(ctx, http.MethodDelete, workflowPath(id), ifMatchHeader(ifMatch), nil, "", nil)
	return err
}

// DeleteWorkflowAt is DeleteWorkflow with If-Match: api.ETag(version).
func (c *Client) DeleteWorkflowAt(ctx context.Context, id string, version int64) error {
	return c.DeleteWorkflow(ctx, id, api.ETag(version))
}

// DeleteDefinition deletes every revision of the named definition. Errors:
// 404 unknown definition (ErrNotFound), 409 while a workflow of it is
// PENDING, QUEUED, RUNNING or PAUSED (ErrConflict). A later PutDefinition of the
// name continues the revision numbers.
func (c *Client) DeleteDefinition(ctx context.Context, name string) error {
	if name == "" {
		return errors.New("flowd client: DeleteDefinition: the definition name is empty")
	}
	_, err := c.do(ctx, http.MethodDelete, definitionPath(name), nil, nil, "", nil)
	return err
}
