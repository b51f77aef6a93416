// Package swcall executes the Serverless Workflow `call: http` and
// `call: openapi` tasks once their runtime expressions are evaluated: it
// expands the endpoint's URI template, sends the request, and shapes the
// answer as the task's output. It never evaluates expressions and never
// returns a Go error: every failure is a DSL error in the Result, so the
// interpreter can catch it like any other.
//
// Outputs:
//   - content (default): the body decoded when the answer's Content-Type is
//     JSON (application/json, any +json) and it parses; else the body as a
//     string when it is UTF-8 text, else base64; an empty body is null.
//   - response: {"request": {"method" (lower case), "uri", "headers"},
//     "statusCode", "headers", "content" (as above)}. Header names are in
//     Go's canonical form (Content-Type), several values joined with ", ";
//     the request's Authorization header is left out so that credentials
//     never land in workflow data.
//   - raw: the body, base64, as a JSON string.
//
// OpenAPI: the document (JSON or YAML, Swagger 2.0 or OpenAPI 3.x) is
// fetched and reused for a minute. Each declared parameter is read from
// the call's parameters by name; undeclared ones are ignored. An OpenAPI 3
// requestBody is the parameter "body"; a Swagger 2 body parameter goes by
// its own name.
package swcall

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/flowd/flowd/internal/outbound"
	"github.com/flowd/flowd/sw"
)

// Request is a call task's `with`, every runtime expression already
// evaluated. Kind "http" uses Method, URI, Query and Body; kind "openapi"
// uses Document, Operation and Parameters; both use Headers, Output and Auth.
type Request struct {
	Kind       string                     `json:"kind"`             // "http" | "openapi"
	Method     string                     `json:"method,omitempty"` // http
	URI        string                     `json:"uri,omitempty"`    // http: a URI template, still with {var} placeholders
	Headers    map[string]string          `json:"headers,omitempty"`
	Query      map[string]string          `json:"query,omitempty"`
	Body       json.RawMessage            `json:"body,omitempty"`
	Output     string                     `json:"output,omitempty"`   // content (default) | response | raw
	Auth       *Auth                      `json:"auth,omitempty"`     // basic {username,password} | bearer {token}
	Document   string                     `json:"document,omitempty"` // openapi: document.endpoint URI
	Operation  string                     `json:"operationId,omitempty"`
	Parameters map[string]json.RawMessage `json:"parameters,omitempty"`
	Vars       json.RawMessage            `json:"vars,omitempty"` // the task's transformed input: values of {var} in URI templates
	Pointer    string                     `json:"pointer"`        // the task's pointer, for Error.Instance
}

// Auth is the inline authentication policy of a call: at most one of Basic
// and Bearer is set.
type Auth struct {
	Basic  *BasicAuth  `json:"basic,omitempty"`
	Bearer *BearerAuth `json:"bearer,omitempty"`
}

// BasicAuth is HTTP basic authentication.
type BasicAuth struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// BearerAuth is a bearer token sent as `Authorization: Bearer <token>`.
type BearerAuth struct {
	Token string `json:"token"`
}

// Result is what a call produced: its output, or the DSL error it raised
// (Error.Instance is the call task's pointer).
type Result = sw.Result

// Error is a Serverless Workflow error (RFC 7807 shaped).
type Error = sw.Error

// The standard error types this package raises.
const (
	TypeConfiguration = sw.ErrorTypePrefix + sw.KindConfiguration
	TypeValidation    = sw.ErrorTypePrefix + sw.KindValidation
	TypeExpression    = sw.ErrorTypePrefix + sw.KindExpression
	TypeTimeout       = sw.ErrorTypePrefix + sw.KindTimeout
	TypeCommunication = sw.ErrorTypePrefix + sw.KindCommunication
	TypeRuntime       = sw.ErrorTypePrefix + sw.KindRuntime
)

// Output formats of a call.
const (
	OutputContent  = "content"
	OutputResponse = "response"
	OutputRaw      = "raw"
)

// Request kinds.
const (
	KindHTTP    = "http"
	KindOpenAPI = "openapi"
)

// callError is a DSL error on its way out; the pointer is added by Do.
type callError struct {
	typ    string
	status int
	title  string
	detail string
}

func (e *callError) Error() string { return e.detail }

func failure(typ string, status int, format string, args ...any) *callError {
	return &callError{typ: typ, status: status, title: titles[typ], detail: fmt.Sprintf(format, args...)}
}

var titles = map[string]string{
	TypeConfiguration: "Configuration Error",
	TypeValidation:    "Validation Error",
	TypeExpression:    "Expression Error",
	TypeTimeout:       "Timeout",
	TypeCommunication: "Communication Error",
	TypeRuntime:       "Runtime Error",
}

// defaultClient makes the calls of a Do given no client: the default
// outbound policy's, which refuses loopback, private, link-local and the
// other addresses that are not globally reachable.
var defaultClient = sync.OnceValue(func() *http.Client { return outbound.Default().Client(30 * time.Second) })

// Do executes the call described by input (a Request as JSON) with client
// (nil: a client of the default outbound policy). Give it a client of the
// operator's outbound policy (internal/outbound): a connection it refuses
// is a configuration error with status 403 naming the address.
// A 2xx answer gives the output in the requested format; anything else is a
// DSL error whose instance is the request's pointer: a non-2xx answer a
// communication error with the answer's status, a transport failure a
// communication error with status 500 (a timeout error, 408, when ctx's
// deadline or the client's timeout ran out; a cancelled ctx also gives a
// communication error, which the canceller should discard), a malformed
// input a runtime error (the interpreter built it, so it is a bug there,
// not the author's).
func Do(ctx context.Context, client *http.Client, input json.RawMessage) Result {
	var req Request
	if err := json.Unmarshal(input, &req); err != nil {
		return Result{Error: &Error{Type: TypeRuntime, Status: http.StatusInternalServerError, Title: titles[TypeRuntime],
			Detail: "malformed call request: " + err.Error()}}
	}
	out, err := do(ctx, client, &req)
	if err != nil {
		var ce *callError
		if !errors.As(err, &ce) {
			ce = failure(TypeRuntime, http.StatusInternalServerError, "%s", err.Error())
		}
		return Result{Error: &Error{Type: ce.typ, Status: ce.status, Title: ce.title, Detail: ce.detail, Instance: req.Pointer}}
	}
	return Result{Output: out}
}

func do(ctx context.Context, client *http.Client, req *Request) (json.RawMessage, error) {
	switch req.Output {
	case "", OutputContent, OutputResponse, OutputRaw:
	default:
		return nil, failure(TypeConfiguration, http.StatusBadRequest, "output %q is not one of content, response, raw", req.Output)
	}
	if client == nil {
		client = defaultClient()
	}
	var (
		out *outgoing
		err error
	)
	switch req.Kind {
	case KindHTTP:
		out, err = httpRequest(req)
	case KindOpenAPI:
		out, err = openAPIRequest(ctx, client, req)
	default:
		return nil, failure(TypeRuntime, http.StatusInternalServerError, "malformed call request: kind %q is neither http nor openapi", req.Kind)
	}
	if err != nil {
		return nil, err
	}
	for name, value := range req.Headers {
		out.header.Set(name, value)
	}
	if req.Auth != nil {
		switch {
		case req.Auth.Basic != nil:
			out.basic = req.Auth.Basic
		case req.Auth.Bearer != nil:
			out.header.Set("Authorization", "Bearer "+req.Auth.Bearer.Token)
		}
	}
	return send(ctx, client, out, req.Output)
}

// httpRequest builds a call: http request: the expanded URI with the query
// map appended, the body as JSON.
func httpRequest(req *Request) (*outgoing, error) {
	if strings.TrimSpace(req.Method) == "" {
		return nil, failure(TypeConfiguration, http.StatusBadRequest, "call: http needs a method")
	}
	uri, err := expandTemplate(req.URI, req.Vars)
	if err != nil {
		return nil, err
	}
	uri, err = appendQuery(uri, req.Query)
	if err != nil {
		return nil, err
	}
	out := &outgoing{method: strings.ToUpper(req.Method), uri: uri, header: http.Header{}}
	if body := strings.TrimSpace(string(req.Body)); body != "" && body != "null" {
		out.body = []byte(body)
		out.header.Set("Content-Type", "application/json")
	}
	return out, nil
}
