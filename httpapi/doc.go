// Package httpapi serves flowd's HTTP API (/v1): JSON handlers over the store,
// conditional requests with ETag / If-Match, the error table that maps store
// and domain errors to status codes — and Client, the Go client of that API.
//
// # Client
//
// Client has a typed method per route: workflows (CreateWorkflow,
// GetWorkflow, ListWorkflows, PatchWorkflow, Transition, Action,
// CompleteStep, History, BatchStatus), definitions (PutDefinition,
// GetDefinition, ListDefinitions), the tasks API of remote workers (PollTask,
// CompleteTask, FailTask, Heartbeat), Healthz and Metrics.
//
// An instance's ETag is its version in quotes (ETag(3) is `"3"`); every
// method returning an instance checks it, so inst.Version is what to send
// back as If-Match: PatchWorkflowAt and CompleteStepAt take the version,
// PatchWorkflow and CompleteStep the raw If-Match value (`"3"` or `*`).
// UpdateWorkflow runs a read → merge → PATCH with If-Match loop that retries
// on 412 with backoff. Failed calls return an *APIError, which errors.Is
// matches against ErrNotFound, ErrConflict, ErrPreconditionFailed, … :
//
//	c := httpapi.NewClient("http://127.0.0.1:8080", httpapi.WithToken(token))
//	inst, err := c.GetWorkflow(ctx, "order-1")
//	if errors.Is(err, httpapi.ErrNotFound) {
//		…
//	}
//	inst, err = c.PatchWorkflowAt(ctx, "order-1", inst.Version, json.RawMessage(`{"variables": {"paid": true}}`))
//	if errors.Is(err, httpapi.ErrPreconditionFailed) {
//		// someone else changed it since the read: read again and decide again
//	}
//
// Remote workers use the worker package on top of this client; a Go program
// that runs the server itself uses the server package.
//
// # Serving
//
// Server is an http.Handler. Besides the routes it refuses what a web page of
// another site could make a browser send: a Host that does not name the
// server (421, DNS rebinding), a state-changing request whose Origin is
// another site (403), a body whose Content-Type the route does not take
// (415). Serve it over JSONErrorListener so that the errors net/http answers
// itself (a request it cannot parse) have the JSON error body too.
//
// The server side owns HTTP concerns only: no SQL, and no workflow rule that
// the store or the workflow package already enforces.
package httpapi
