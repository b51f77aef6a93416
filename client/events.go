package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/flowd/flowd/api"
)

// PublishEvent publishes the event name with key and data (nil: null) and
// returns its id, the instances whose steps it completed and the steps it
// failed instead (Failed). Errors: 400.
func (c *Client) PublishEvent(ctx context.Context, name, key string, data json.RawMessage) (*api.PublishEventResponse, error) {
	body, err := json.Marshal(api.PublishEventRequest{Name: name, Key: key, Data: data})
	if err != nil {
		return nil, fmt.Errorf("flowd client: encoding event: %w", err)
	}
	var out api.PublishEventResponse
	if _, err := c.do(ctx, http.MethodPost, "/v1/events", nil, body, "application/json", &out); err != nil {
		return nil, err
	}
	if out.Delivered == nil {
		out.Delivered = []string{}
	}
	if out.Failed == nil {
		out.Failed = []api.EventFailure{}
	}
	return &out, nil
}
