package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/workflow/instance"
)

// ParseETag returns the version of a strong ETag such as `"4"`, the value of
// the ETag header of every response that carries an instance. A weak tag or
// anything else is an error: only a strong tag can be sent back as If-Match.
func ParseETag(etag string) (int64, error) {
	inner, ok := strings.CutPrefix(etag, `"`)
	if ok {
		inner, ok = strings.CutSuffix(inner, `"`)
	}
	v, err := strconv.ParseInt(inner, 10, 64)
	if !ok || err != nil || v < 0 || strconv.FormatInt(v, 10) != inner {
		return 0, fmt.Errorf("flowd client: %q is not the ETag of an instance version (want e.g. \"4\", quotes included)", etag)
	}
	return v, nil
}

// PatchWorkflowAt is PatchWorkflow with If-Match: api.ETag(version): the patch is
// applied only if the instance is still at version (else ErrPreconditionFailed).
func (c *Client) PatchWorkflowAt(ctx context.Context, id string, version int64, patch json.RawMessage) (*instance.Instance, error) {
	return c.PatchWorkflow(ctx, id, api.ETag(version), patch)
}

// CompleteStepAt is CompleteStep with If-Match: api.ETag(version).
func (c *Client) CompleteStepAt(ctx context.Context, id, step string, version int64, output json.RawMessage) (*instance.Instance, error) {
	return c.CompleteStep(ctx, id, step, api.ETag(version), output)
}

// GetWorkflowIfChanged reads the instance unless it is still at version
// (If-None-Match: api.ETag(version)): changed is false, and the instance nil,
// when the server answered 304 Not Modified. Errors: 404.
func (c *Client) GetWorkflowIfChanged(ctx context.Context, id string, version int64) (inst *instance.Instance, changed bool, err error) {
	inst, err = c.instance(ctx, http.MethodGet, workflowPath(id), http.Header{"If-None-Match": {api.ETag(version)}}, nil, "")
	if StatusCode(err) == http.StatusNotModified {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return inst, true, nil
}

// Metrics returns the server's metrics in the Prometheus text format (GET /metrics).
func (c *Client) Metrics(ctx context.Context) (string, error) {
	var raw []byte
	if _, err := c.do(ctx, http.MethodGet, "/metrics", nil, nil, "", &raw); err != nil {
		return "", err
	}
	return string(raw), nil
}

// RetryPolicy bounds the retries of UpdateWorkflow. Zero values take the
// defaults in brackets.
type RetryPolicy struct {
	// MaxAttempts is how many times the instance is read and the patch tried [10].
	MaxAttempts int
	// BaseDelay is the backoff before the second attempt; it doubles with each
	// further attempt, up to MaxDelay. Each wait is drawn uniformly from zero
	// to that bound (full jitter), so writers that collided spread out [10ms].
	BaseDelay time.Duration
	// MaxDelay caps the backoff bound [1s].
	MaxDelay time.Duration
}

// MergeFunc computes the JSON Merge Patch (RFC 7396) to apply to the state of
// inst, the instance as just read. It may be called several times, once per
// attempt, each time with a fresher instance: it must decide from inst alone
// and have no other effect. Returning a nil (or empty) patch writes nothing;
// an error ends UpdateWorkflow with that error.
type MergeFunc func(inst *instance.Instance) (json.RawMessage, error)

// UpdateWorkflow is an optimistic read-modify-write of the instance's state:
// it reads the instance, asks merge for a patch, and sends it with If-Match of
// the version read. When another writer got there first (412), it waits a
// backoff (see RetryPolicy), reads again and calls merge again, for at most
// policy.MaxAttempts attempts. It returns the instance as written, or as read
// when merge returned no patch.
//
// Errors: merge's error as is; ctx's error when ctx ends (also during a
// backoff); after the last attempt, an error that errors.Is
// ErrPreconditionFailed; any other error of the read or the patch (404
// unknown id, 409 terminal instance, 400 a patch that is not an object) at
// once, without retrying.
func (c *Client) UpdateWorkflow(ctx context.Context, id string, policy RetryPolicy, merge MergeFunc) (*instance.Instance, error) {
	if merge == nil {
		return nil, errors.New("flowd client: UpdateWorkflow needs a merge function")
	}
	if policy.MaxAttempts <= 0 {
		policy.MaxAttempts = 10
	}
	if policy.BaseDelay <= 0 {
		policy.BaseDelay = 10 * time.Millisecond
	}
	if policy.MaxDelay <= 0 {
		policy.MaxDelay = time.Second
	}
	var lastErr error
	for attempt := range policy.MaxAttempts {
		if attempt > 0 {
			if err := sleepCtx(ctx, backoff(policy, attempt)); err != nil {
				return nil, err
			}
		}
		inst, err := c.GetWorkflow(ctx, id)
		if err != nil {
			return nil, err
		}
		patch, err := merge(inst)
		if err != nil {
			return nil, err
		}
		if len(strings.TrimSpace(string(patch))) == 0 {
			return inst, nil
		}
		written, err := c.PatchWorkflowAt(ctx, id, inst.Version, patch)
		if !errors.Is(err, ErrPreconditionFailed) {
			return written, err
		}
		lastErr = err
	}
	return nil, fmt.Errorf("flowd client: updating workflow %s: other writers won all %d attempts: %w", id, policy.MaxAttempts, lastErr)
}

// backoff is a full-jitter wait before attempt (1-based after the first):
// uniform in [0, min(MaxDelay, BaseDelay·2^(attempt-1))].
func backoff(p RetryPolicy, attempt int) time.Duration {
	bound := p.MaxDelay
	if attempt-1 < 30 {
		if d := p.BaseDelay << (attempt - 1); d > 0 && d < bound {
			bound = d
		}
	}
	return time.Duration(rand.Int64N(int64(bound) + 1))
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
