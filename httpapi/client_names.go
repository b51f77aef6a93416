package httpapi

import (
	"net/http"

	"github.com/flowd/flowd/client"
)

// The Go client of the API lives in package client, which links none of the
// server. These are its former names here, kept for existing programs;
// new code imports package client.
type (
	Client       = client.Client
	ClientOption = client.Option
	APIError     = client.APIError
	ListOptions  = client.ListOptions
	CreateOption = client.CreateOption
	RetryPolicy  = client.RetryPolicy
	MergeFunc    = client.MergeFunc
)

// The client's errors by status: the same values as in package client.
var (
	ErrBadRequest           = client.ErrBadRequest
	ErrUnauthorized         = client.ErrUnauthorized
	ErrForbidden            = client.ErrForbidden
	ErrNotFound             = client.ErrNotFound
	ErrConflict             = client.ErrConflict
	ErrPreconditionFailed   = client.ErrPreconditionFailed
	ErrTooLarge             = client.ErrTooLarge
	ErrUnsupportedMediaType = client.ErrUnsupportedMediaType
	ErrUnprocessable        = client.ErrUnprocessable
	ErrPreconditionRequired = client.ErrPreconditionRequired
	ErrServer               = client.ErrServer
	ErrUnavailable          = client.ErrUnavailable
)

// NewClient is client.New.
func NewClient(baseURL string, opts ...ClientOption) *Client { return client.New(baseURL, opts...) }

// WithToken is client.WithToken.
func WithToken(token string) ClientOption { return client.WithToken(token) }

// WithHTTPClient is client.WithHTTPClient.
func WithHTTPClient(hc *http.Client) ClientOption { return client.WithHTTPClient(hc) }

// WithHeader is client.WithHeader.
func WithHeader(key, value string) ClientOption { return client.WithHeader(key, value) }

// StatusCode is client.StatusCode.
func StatusCode(err error) int { return client.StatusCode(err) }

// IsNotFound is client.IsNotFound.
func IsNotFound(err error) bool { return client.IsNotFound(err) }

// IsConflict is client.IsConflict.
func IsConflict(err error) bool { return client.IsConflict(err) }

// IsUnauthorized is client.IsUnauthorized.
func IsUnauthorized(err error) bool { return client.IsUnauthorized(err) }
