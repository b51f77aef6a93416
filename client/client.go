package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/tracing/traceparent"
	"github.com/flowd/flowd/workflow/instance"
)

// Client is a Go client for the flowd API. It is safe for
// concurrent use.
//
// Every method that returns an instance checks that the response's ETag is the
// instance's version, so inst.Version is always what to send as If-Match next:
// api.ETag(inst.Version), or the methods taking a version (PatchWorkflowAt,
// CompleteStepAt). UpdateWorkflow retries a read-modify-write on 412. Errors
// the server reports are *APIError; test them with errors.Is and the
// sentinels (ErrNotFound, ErrPreconditionFailed, …), or StatusCode.
type Client struct {
	base   *url.URL // without a trailing slash in Path
	err    error    // a bad base URL, reported by every call
	token  string
	http   *http.Client
	header http.Header
}

// Option configures New.
type Option func(*Client)

// WithToken sends `Authorization: Bearer <token>` with every request.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithHTTPClient makes the client send its requests through hc (its Transport,
// Timeout and Jar). hc itself is not modified: the client uses a copy whose
// redirect policy refuses to follow redirects of writes.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.http = hc
		}
	}
}

// WithHeader adds a header to every request (e.g. X-Request-Id, User-Agent).
func WithHeader(key, value string) Option {
	return func(c *Client) { c.header.Add(key, value) }
}

// New returns a client of the server at baseURL, e.g.
// "http://127.0.0.1:8080" (a path prefix such as "https://host/flowd" is kept).
// A malformed baseURL is reported by the first call, not here.
func New(baseURL string, opts ...Option) *Client {
	c := &Client{http: &http.Client{}, header: http.Header{}}
	for _, o := range opts {
		o(c)
	}
	c.base, c.err = parseBaseURL(baseURL)

	// A copy, so the caller's client keeps its own policy for its other uses.
	hc := *c.http
	prev := hc.CheckRedirect
	hc.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		// A redirected write might be replayed elsewhere, or silently turned
		// into a GET by a 301/302: return the 3xx to the caller instead.
		if m := via[0].Method; m != http.MethodGet && m != http.MethodHead {
			return http.ErrUseLastResponse
		}
		if prev != nil {
			return prev(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	c.http = &hc
	if c.header.Get("User-Agent") == "" {
		c.header.Set("User-Agent", "flowd-client")
	}
	return c
}

func parseBaseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("flowd client: server URL %q: %w", raw, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("flowd client: server URL %q must be http:// or https:// with a host, e.g. http://127.0.0.1:8080", raw)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("flowd client: server URL %q must not carry credentials, a query or a fragment (use a bearer token for authentication)", raw)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// APIError is an error response of the API: a non-2xx status with the body
// {"error": reason, "message": detail}.
type APIError struct {
	StatusCode int
	Reason     string // the body's "error" field: the HTTP reason phrase
	Message    string // the body's "message" field: what went wrong
	RequestID  string // the X-Request-Id response header, for the server log
	// Problems lists every problem of a definition or schedule rejected
	// by PUT /v1/definitions/{name} or PUT /v1/schedules/{name} (400);
	// Message joins them.
	Problems []string
}

// Error formats the error as "412 Precondition Failed: <message>".
func (e *APIError) Error() string {
	reason := e.Reason
	if reason == "" {
		reason = http.StatusText(e.StatusCode)
	}
	s := strconv.Itoa(e.StatusCode)
	if reason != "" {
		s += " " + reason
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// StatusCode returns the HTTP status of an *APIError anywhere in err's chain,
// and 0 for any other error (transport failures, bad arguments, …).
func StatusCode(err error) int {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.StatusCode
	}
	return 0
}

// Sentinel errors by status, matched by errors.Is on the *APIError of a
// failed call: errors.Is(err, client.ErrPreconditionFailed). The *APIError
// (errors.As) carries the server's message and request id.
var (
	// ErrBadRequest: 400, a malformed request or an invalid definition
	// (APIError.Problems lists its problems).
	ErrBadRequest = errors.New("bad request")
	// ErrUnauthorized: 401, no bearer token, or one the server does not know.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrForbidden: 403, e.g. a state-changing request from another site's page.
	ErrForbidden = errors.New("forbidden")
	// ErrNotFound: 404, unknown workflow, step, definition or task.
	ErrNotFound = errors.New("not found")
	// ErrConflict: 409, the instance is terminal, the step is already
	// completed, the status is not the expected one, or the id exists; on the
	// tasks routes, the lease is stale or expired or the instance stopped
	// running (the worker has been fenced off and must drop the task).
	ErrConflict = errors.New("conflict")
	// ErrPreconditionFailed: 412, If-Match did not match the current version;
	// re-read the instance and decide again (UpdateWorkflow does this).
	ErrPreconditionFailed = errors.New("precondition failed")
	// ErrTooLarge: 413, a request body or resulting state over the server's limit.
	ErrTooLarge = errors.New("request too large")
	// ErrUnsupportedMediaType: 415, a body with a Content-Type the route does not take.
	ErrUnsupportedMediaType = errors.New("unsupported media type")
	// ErrUnprocessable: 422, a status transition the transition table does not allow.
	ErrUnprocessable = errors.New("unprocessable")
	// ErrPreconditionRequired: 428, the route requires If-Match.
	ErrPreconditionRequired = errors.New("precondition required")
	// ErrServer: any 5xx, the server or its database failed; the request may
	// be tried again later (503 is also ErrUnavailable).
	ErrServer = errors.New("server error")
	// ErrUnavailable: 503, the database is unreachable or the server is overloaded.
	ErrUnavailable = errors.New("service unavailable")
)

var sentinelStatus = map[error]int{
	ErrBadRequest: http.StatusBadRequest, ErrUnauthorized: http.StatusUnauthorized,
	ErrForbidden: http.StatusForbidden, ErrNotFound: http.StatusNotFound,
	ErrConflict: http.StatusConflict, ErrPreconditionFailed: http.StatusPreconditionFailed,
	ErrTooLarge: http.StatusRequestEntityTooLarge, ErrUnsupportedMediaType: http.StatusUnsupportedMediaType,
	ErrUnprocessable: http.StatusUnprocessableEntity, ErrPreconditionRequired: http.StatusPreconditionRequired,
	ErrUnavailable: http.StatusServiceUnavailable,
}

// Is makes errors.Is(err, ErrNotFound) and the other sentinels of this
// package match the error of their status.
func (e *APIError) Is(target error) bool {
	if target == ErrServer {
		return e.StatusCode >= 500 && e.StatusCode <= 599
	}
	status, ok := sentinelStatus[target]
	return ok && status == e.StatusCode
}

// IsNotFound reports a 404 (ErrNotFound): unknown workflow, step or definition.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// IsConflict reports a 409 (ErrConflict).
func IsConflict(err error) bool { return errors.Is(err, ErrConflict) }

// IsBadRequest reports a 400 (ErrBadRequest).
func IsBadRequest(err error) bool { return errors.Is(err, ErrBadRequest) }

// IsPreconditionFailed reports a 412 (ErrPreconditionFailed).
func IsPreconditionFailed(err error) bool { return errors.Is(err, ErrPreconditionFailed) }

// IsPreconditionRequired reports a 428 (ErrPreconditionRequired).
func IsPreconditionRequired(err error) bool { return errors.Is(err, ErrPreconditionRequired) }

// IsUnauthorized reports a 401 (ErrUnauthorized).
func IsUnauthorized(err error) bool { return errors.Is(err, ErrUnauthorized) }

// ListOptions filter and page ListWorkflows; zero values mean "any" and the
// server's default limit.
type ListOptions struct {
	Status     instance.Status
	Definition string
	Limit      int
	Cursor     string // NextCursor of the previous page
	// IDPrefix keeps the instances whose id starts with it.
	IDPrefix string
	// Parent keeps the child workflows of that instance.
	Parent string
	// Search keeps the instances whose search attribute NAME has the
	// value (compared as text; several are ANDed).
	Search map[string]string
	// CreatedAfter, CreatedBefore and UpdatedBefore keep the instances
	// created after, created before and last written before them (zero:
	// any).
	CreatedAfter, CreatedBefore, UpdatedBefore time.Time
}

// Actions are the convenience transitions that Action accepts.
var Actions = []string{"cancel", "pause", "resume", "retry"}

// CreateWorkflow starts an instance. Errors: 404 unknown definition, 409 an
// instance with req.ID exists, 400 invalid id or state; with
// WithIdempotencyKey, 422 for a key used with another request.
func (c *Client) CreateWorkflow(ctx context.Context, req api.CreateWorkflowRequest, opts ...CreateOption) (*instance.Instance, error) {
	var o createOptions
	for _, opt := range opts {
		opt(&o)
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("flowd client: encoding create request: %w", err)
	}
	var hdr http.Header
	if o.idempotencyKey != "" {
		hdr = http.Header{api.IdempotencyKeyHeader: {o.idempotencyKey}}
	}
	inst, status, err := c.instanceStatus(ctx, http.MethodPost, "/v1/workflows", hdr, body, "application/json")
	if err != nil {
		return nil, err
	}
	if o.created != nil {
		*o.created = status == http.StatusCreated
	}
	return inst, nil
}

// CreateOption is an option of CreateWorkflow.
type CreateOption func(*createOptions)

type createOptions struct {
	idempotencyKey string
	created        *bool
}

// WithCreated sets *created when CreateWorkflow succeeds: true when this
// request created the instance (201), false when an earlier request with
// the same idempotency key did (200).
func WithCreated(created *bool) CreateOption {
	return func(o *createOptions) { o.created = created }
}

// WithIdempotencyKey sends key as the Idempotency-Key header, which makes
// the create safe to send again (after a timeout or a lost connection): a
// repeat with the same key and body within 24 hours returns the instance
// the first request created, as it is now, instead of creating another;
// the same key with a different body is a 422 *APIError. A key has 1–255
// printable ASCII characters (400 otherwise).
func WithIdempotencyKey(key string) CreateOption {
	return func(o *createOptions) { o.idempotencyKey = key }
}

// GetWorkflow returns the instance. Errors: 404.
func (c *Client) GetWorkflow(ctx context.Context, id string) (*instance.Instance, error) {
	return c.instance(ctx, http.MethodGet, workflowPath(id), nil, nil, "")
}

// ListWorkflows returns one page of instances, newest first.
func (c *Client) ListWorkflows(ctx context.Context, opts ListOptions) (*api.ListWorkflowsResponse, error) {
	q := url.Values{}
	if opts.Status != "" {
		q.Set("status", string(opts.Status))
	}
	if opts.Definition != "" {
		q.Set("definition", opts.Definition)
	}
	if opts.Limit != 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.Cursor != "" {
		q.Set("cursor", opts.Cursor)
	}
	if opts.IDPrefix != "" {
		q.Set("id_prefix", opts.IDPrefix)
	}
	if opts.Parent != "" {
		q.Set("parent", opts.Parent)
	}
	for name, v := range opts.Search {
		q.Set("search."+name, v)
	}
	for name, t := range map[string]time.Time{"created_after": opts.CreatedAfter, "created_before": opts.CreatedBefore, "updated_before": opts.UpdatedBefore} {
		if !t.IsZero() {
			q.Set(name, t.UTC().Format(time.RFC3339Nano))
		}
	}
	path := "/v1/workflows"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out api.ListWorkflowsResponse
	if _, err := c.do(ctx, http.MethodGet, path, nil, nil, "", &out); err != nil {
		return nil, err
	}
	if out.Workflows == nil {
		out.Workflows = []*instance.Instance{}
	}
	return &out, nil
}

// PatchWorkflow applies a JSON Merge Patch (RFC 7396) to the instance's state.
// ifMatch is the raw If-Match value: api.ETag(version) such as `"3"`, or `*` for
// any version; "" sends none (the server answers 428). Errors: 412 stale
// version, 428, 404, 409 terminal instance, 400 bad patch or If-Match.
func (c *Client) PatchWorkflow(ctx context.Context, id, ifMatch string, patch json.RawMessage) (*instance.Instance, error) {
	return c.instance(ctx, http.MethodPatch, workflowPath(id), ifMatchHeader(ifMatch), patch, "application/merge-patch+json")
}

// Transition moves the instance from → to. Errors: 409 the current status is
// not from, 422 from → to is not an allowed transition, 404.
func (c *Client) Transition(ctx context.Context, id string, from, to instance.Status) (*instance.Instance, error) {
	body, err := json.Marshal(api.TransitionRequest{From: from, To: to})
	if err != nil {
		return nil, fmt.Errorf("flowd client: encoding transition: %w", err)
	}
	return c.instance(ctx, http.MethodPost, workflowPath(id)+"/status", nil, body, "application/json")
}

// Action runs one of the convenience transitions cancel, pause, resume or
// retry from whatever the current status is. Errors: 409 not allowed from the
// current status, 404.
func (c *Client) Action(ctx context.Context, id, name string) (*instance.Instance, error) {
	known := false
	for _, a := range Actions {
		known = known || a == name
	}
	if !known {
		return nil, fmt.Errorf("flowd client: unknown action %q (want one of %s)", name, strings.Join(Actions, ", "))
	}
	return c.instance(ctx, http.MethodPost, workflowPath(id)+"/"+name, nil, []byte("{}"), "application/json")
}

// CompleteStep marks the step COMPLETED with output (nil means JSON null).
// ifMatch is as for PatchWorkflow. Errors: 412, 428, 404 unknown workflow or
// step, 409 step already completed or instance terminal.
func (c *Client) CompleteStep(ctx context.Context, id, step, ifMatch string, output json.RawMessage) (*instance.Instance, error) {
	body, err := json.Marshal(api.CompleteStepRequest{Output: output})
	if err != nil {
		return nil, fmt.Errorf("flowd client: encoding step output: %w", err)
	}
	path := workflowPath(id) + "/steps/" + pathSegment(step) + "/complete"
	return c.instance(ctx, http.MethodPost, path, ifMatchHeader(ifMatch), body, "application/json")
}

// BatchStatus moves at most req.Limit instances in req.Status last updated
// before req.UpdatedBefore to req.NewStatus and returns their ids. Errors: 400
// bad input, 422 transition not allowed.
func (c *Client) BatchStatus(ctx context.Context, req api.BatchStatusRequest) ([]string, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("flowd client: encoding batch request: %w", err)
	}
	var out api.BatchStatusResponse
	if _, err := c.do(ctx, http.MethodPost, "/v1/batch/status", nil, body, "application/json", &out); err != nil {
		return nil, err
	}
	if out.IDs == nil {
		out.IDs = []string{}
	}
	return out.IDs, nil
}

// History returns every version of the instance, oldest first, following
// the pages of GET …/history. Errors: 404.
func (c *Client) History(ctx context.Context, id string) ([]instance.HistoryEntry, error) {
	var all []instance.HistoryEntry
	var since int64
	for {
		page, err := c.HistoryPage(ctx, id, HistoryOptions{Since: since})
		if err != nil {
			return nil, err
		}
		all = append(all, page.Versions...)
		if page.NextSince == nil {
			return all, nil
		}
		if *page.NextSince <= since {
			return nil, fmt.Errorf("flowd client: history of %s: next_since %d does not move on from %d", id, *page.NextSince, since)
		}
		since = *page.NextSince
	}
}

// HistoryOptions select a page of HistoryPage.
type HistoryOptions struct {
	Since int64 // the first version to return; 0 for the first page
	Limit int   // 1–1000; 0 means the server's default (1000)
}

// HistoryPage returns one page of versions, oldest first, from opts.Since
// on; NextSince, when not nil, is the Since of the next page. A page may
// hold fewer versions than Limit (the server bounds its bytes). Errors:
// 404, 400 (bad since or limit).
func (c *Client) HistoryPage(ctx context.Context, id string, opts HistoryOptions) (*api.HistoryResponse, error) {
	q := url.Values{}
	if opts.Since != 0 {
		q.Set("since", strconv.FormatInt(opts.Since, 10))
	}
	if opts.Limit != 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	path := workflowPath(id) + "/history"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out api.HistoryResponse
	if _, err := c.do(ctx, http.MethodGet, path, nil, nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Healthz returns nil when the server and its database answer; otherwise an
// *APIError (503) or a transport error.
func (c *Client) Healthz(ctx context.Context) error {
	_, err := c.do(ctx, http.MethodGet, "/healthz", nil, nil, "", nil)
	return err
}

// PutDefinition stores body, a definition in YAML or JSON,
// under name, which must be the definition's own name. created is false when
// the definition equals the latest revision, which is then returned
// unchanged. Errors: 400 invalid definition (APIError.Problems lists every
// problem) or a name that is not the definition's.
func (c *Client) PutDefinition(ctx context.Context, name string, body []byte) (resp *api.DefinitionResponse, created bool, err error) {
	if name == "" {
		return nil, false, errors.New("flowd client: PutDefinition: the definition name is empty")
	}
	contentType := "application/yaml"
	if json.Valid(body) {
		contentType = "application/json"
	}
	var out api.DefinitionResponse
	status, _, err := c.send(ctx, c.http, http.MethodPut, definitionPath(name), nil, body, contentType, &out)
	if err != nil {
		return nil, false, err
	}
	return &out, status == http.StatusCreated, nil
}

// GetDefinition returns revision rev of the named definition; rev 0 means the
// latest. Errors: 404 unknown definition or revision.
func (c *Client) GetDefinition(ctx context.Context, name string, rev int) (*api.DefinitionInfo, error) {
	if name == "" {
		return nil, errors.New("flowd client: GetDefinition: the definition name is empty")
	}
	if rev < 0 {
		return nil, fmt.Errorf("flowd client: GetDefinition: revision must be 0 (the latest) or positive, not %d", rev)
	}
	path := definitionPath(name)
	if rev > 0 {
		path += "?revision=" + strconv.Itoa(rev)
	}
	var out api.DefinitionInfo
	if _, err := c.do(ctx, http.MethodGet, path, nil, nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListDefinitions returns the latest revision of every definition.
func (c *Client) ListDefinitions(ctx context.Context) ([]*api.DefinitionInfo, error) {
	var out api.ListDefinitionsResponse
	if _, err := c.do(ctx, http.MethodGet, "/v1/definitions", nil, nil, "", &out); err != nil {
		return nil, err
	}
	if out.Definitions == nil {
		out.Definitions = []*api.DefinitionInfo{}
	}
	return out.Definitions, nil
}

// pollSlack is how much longer than its wait_seconds a long poll may take
// before the client gives up on it: the claim itself and the network.
const pollSlack = 15 * time.Second

// PollTask long-polls for one task of req.Handlers, waiting up to
// req.WaitSeconds (nil: the server answers at once). It returns nil, nil when
// no task came within the wait (204). If the client's HTTP timeout is shorter
// than the wait, this request gets a longer one, so a long poll is never cut
// short by the client. Errors: 400 bad handler names or seconds.
func (c *Client) PollTask(ctx context.Context, req api.PollRequest) (*api.TaskResponse, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("flowd client: encoding poll request: %w", err)
	}
	hc := c.http
	if req.WaitSeconds != nil && *req.WaitSeconds > 0 {
		need := time.Duration(*req.WaitSeconds*float64(time.Second)) + pollSlack
		if hc.Timeout > 0 && hc.Timeout < need {
			longer := *hc
			longer.Timeout = need
			hc = &longer
		}
	}
	var out api.TaskResponse
	status, _, err := c.send(ctx, hc, http.MethodPost, "/v1/tasks/poll", nil, body, "application/json", &out)
	if err != nil {
		return nil, err
	}
	if status == http.StatusNoContent {
		return nil, nil
	}
	return &out, nil
}

// CompleteTask records output (nil means JSON null) as the result of the
// attempt holding lease. Errors: 409 (IsConflict) the lease is stale or
// expired or the instance is no longer running — nothing was recorded; 404
// unknown task; 400 output not valid JSON.
func (c *Client) CompleteTask(ctx context.Context, taskID, lease string, output json.RawMessage) error {
	if len(output) > 0 && !json.Valid(output) {
		return errors.New("flowd client: CompleteTask: output is not valid JSON")
	}
	return c.taskCall(ctx, taskID, "complete", api.CompleteTaskRequest{Lease: lease, Output: output}, nil)
}

// FailTask records a failed attempt with the error message msg: retried
// after the step's backoff while attempts are left and retryable is true,
// else the step fails. Errors as for CompleteTask.
func (c *Client) FailTask(ctx context.Context, taskID, lease, msg string, retryable bool) error {
	return c.taskCall(ctx, taskID, "fail", api.FailTaskRequest{Lease: lease, Error: msg, Retryable: &retryable}, nil)
}

// Heartbeat extends the lease by leaseSeconds (<= 0: the server's default
// lease), never past the attempt's deadline, and returns the new expiry.
// Errors as for CompleteTask: on 409 the worker no longer holds the task.
func (c *Client) Heartbeat(ctx context.Context, taskID, lease string, leaseSeconds float64) (time.Time, error) {
	req := api.HeartbeatRequest{Lease: lease}
	if leaseSeconds > 0 {
		req.LeaseSeconds = &leaseSeconds
	}
	var out api.HeartbeatResponse
	if err := c.taskCall(ctx, taskID, "heartbeat", req, &out); err != nil {
		return time.Time{}, err
	}
	return out.LeaseUntil, nil
}

// taskCall posts req to /v1/tasks/{taskID}/{action}.
func (c *Client) taskCall(ctx context.Context, taskID, action string, req, out any) error {
	if taskID == "" {
		return fmt.Errorf("flowd client: %s task: the task id is empty", action)
	}
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("flowd client: encoding %s request: %w", action, err)
	}
	_, err = c.do(ctx, http.MethodPost, "/v1/tasks/"+pathSegment(taskID)+"/"+action, nil, body, "application/json", out)
	return err
}

func definitionPath(name string) string { return "/v1/definitions/" + pathSegment(name) }

func workflowPath(id string) string { return "/v1/workflows/" + pathSegment(id) }

// pathSegment escapes s as one path segment ("." and ".." are not valid ids,
// so no segment can be taken for a directory step).
func pathSegment(s string) string { return url.PathEscape(s) }

func ifMatchHeader(v string) http.Header {
	if v == "" {
		return nil
	}
	return http.Header{"If-Match": {v}}
}

// instance sends a request whose success body is one instance with its ETag.
func (c *Client) instance(ctx context.Context, method, path string, hdr http.Header, body []byte, contentType string) (*instance.Instance, error) {
	inst, _, err := c.instanceStatus(ctx, method, path, hdr, body, contentType)
	return inst, err
}

// instanceStatus is instance that also returns the response's status.
func (c *Client) instanceStatus(ctx context.Context, method, path string, hdr http.Header, body []byte, contentType string) (*instance.Instance, int, error) {
	var inst instance.Instance
	status, resp, err := c.send(ctx, c.http, method, path, hdr, body, contentType, &inst)
	if err != nil {
		return nil, 0, err
	}
	if got, want := resp.Get("ETag"), api.ETag(inst.Version); got != want {
		return nil, 0, fmt.Errorf("flowd client: %s %s: the response's ETag is %q but the instance is at version %d (want ETag %s)", method, path, got, inst.Version, want)
	}
	return &inst, status, nil
}

// maxResponseBytes bounds what the client reads of one response.
const maxResponseBytes = 64 << 20

// do sends one request and decodes a 2xx JSON body into out (if not nil). It
// returns the response headers; non-2xx responses become *APIError.
func (c *Client) do(ctx context.Context, method, path string, hdr http.Header, body []byte, contentType string, out any) (http.Header, error) {
	_, h, err := c.send(ctx, c.http, method, path, hdr, body, contentType, out)
	return h, err
}

// send is do through hc, also returning the status; a 204 leaves out alone.
func (c *Client) send(ctx context.Context, hc *http.Client, method, path string, hdr http.Header, body []byte, contentType string, out any) (int, http.Header, error) {
	if c.err != nil {
		return 0, nil, c.err
	}
	u := c.base.String() + path
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, nil, fmt.Errorf("flowd client: %w", err)
	}
	for k, vs := range c.header {
		req.Header[k] = append([]string(nil), vs...)
	}
	for k, vs := range hdr {
		req.Header[k] = append([]string(nil), vs...)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil && contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	traceparent.Inject(ctx, req.Header)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err // *url.Error: names the method and URL already
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return 0, nil, fmt.Errorf("flowd client: reading the response of %s %s: %w", method, u, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return 0, nil, apiErrorFrom(method, resp, data)
	}
	if raw, ok := out.(*[]byte); ok {
		*raw = data
	} else if out != nil && resp.StatusCode != http.StatusNoContent {
		if err := json.Unmarshal(data, out); err != nil {
			return 0, nil, fmt.Errorf("flowd client: decoding the response of %s %s (%s): %w", method, u, resp.Status, err)
		}
	}
	return resp.StatusCode, resp.Header, nil
}

func apiErrorFrom(method string, resp *http.Response, data []byte) *APIError {
	e := &APIError{StatusCode: resp.StatusCode, RequestID: resp.Header.Get("X-Request-Id")}
	var body api.ErrorBody
	if json.Unmarshal(data, &body) == nil && (body.Error != "" || body.Message != "") {
		e.Reason, e.Message, e.Problems = body.Error, body.Message, body.Problems
		return e
	}
	e.Reason = http.StatusText(resp.StatusCode)
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		e.Message = fmt.Sprintf("the server redirected %s to %q; redirects of writes are not followed (check the server URL)", method, resp.Header.Get("Location"))
	default:
		// Not a flowd error body (a proxy, a load balancer): keep a short,
		// printable excerpt so the caller sees who answered.
		e.Message = excerpt(data, 200)
	}
	return e
}

func excerpt(b []byte, n int) string {
	s := strings.TrimSpace(string(b))
	if !utf8.ValidString(s) {
		return fmt.Sprintf("(%d bytes of non-text body)", len(b))
	}
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		cut := n
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// ListWorkers returns the remote workers and in-process pools of every node
// that polled in the last five minutes, the most recent poll first.
func (c *Client) ListWorkers(ctx context.Context) ([]api.Worker, error) {
	var out api.ListWorkersResponse
	if _, err := c.do(ctx, http.MethodGet, "/v1/workers", nil, nil, "", &out); err != nil {
		return nil, err
	}
	if out.Workers == nil {
		out.Workers = []api.Worker{}
	}
	return out.Workers, nil
}
