// Package client is the Go client of flowd's HTTP API: workflows,
// definitions, history, and the tasks API that remote workers use.
//
//	c := client.New("http://127.0.0.1:8080", client.WithToken(token))
//	inst, err := c.CreateWorkflow(ctx, api.CreateWorkflowRequest{Definition: "order"})
//
// It links none of the server: the bodies it sends and reads are those of
// package api, and an instance is a workflow/instance.Instance (the type
// the server's packages call workflow.Instance).
package client
