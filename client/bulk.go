package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/flowd/flowd/api"
)

func bulkPath(id string) string { return "/v1/bulk/" + pathSegment(id) }

// CreateBulk asks for a bulk operation; the server answers at once with
// it RUNNING and works it off in the background.
func (c *Client) CreateBulk(ctx context.Context, req api.BulkRequest) (*api.BulkOperation, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("flowd client: encoding bulk operation: %w", err)
	}
	var out api.BulkOperation
	if _, err := c.do(ctx, http.MethodPost, "/v1/bulk", nil, body, "application/json", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetBulk returns the bulk operation id and its progress.
func (c *Client) GetBulk(ctx context.Context, id string) (*api.BulkOperation, error) {
	if id == "" {
		return nil, errors.New("flowd client: GetBulk: the id is empty")
	}
	var out api.BulkOperation
	if _, err := c.do(ctx, http.MethodGet, bulkPath(id), nil, nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CancelBulk stops the bulk operation id after its batch in flight.
func (c *Client) CancelBulk(ctx context.Context, id string) (*api.BulkOperation, error) {
	if id == "" {
		return nil, errors.New("flowd client: CancelBulk: the id is empty")
	}
	var out api.BulkOperation
	if _, err := c.do(ctx, http.MethodPost, bulkPath(id)+"/cancel", nil, []byte(`{}`), "application/json", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CountBulk returns how many instances filter matches now (counted up to
// a bound the answer's Exact tells).
func (c *Client) CountBulk(ctx context.Context, f api.BulkFilter) (*api.BulkCount, error) {
	q := url.Values{}
	for k, v := range map[string]string{"status": f.Status, "definition": f.Definition, "parent": f.Parent, "id_prefix": f.IDPrefix,
		"created_after": f.CreatedAfter, "created_before": f.CreatedBefore, "updated_before": f.UpdatedBefore} {
		if v != "" {
			q.Set(k, v)
		}
	}
	for name, raw := range f.Search {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			s = string(raw)
		}
		q.Set("search."+name, s)
	}
	var out api.BulkCount
	if _, err := c.do(ctx, http.MethodGet, "/v1/bulk/count?"+q.Encode(), nil, nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}
