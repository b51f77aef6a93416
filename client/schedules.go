package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/workflow/instance"
)

func schedulePath(name string) string { return "/v1/schedules/" + pathSegment(name) }

// PutSchedule creates (true) or replaces (false) the schedule name.
func (c *Client) PutSchedule(ctx context.Context, name string, req api.PutScheduleRequest) (*api.Schedule, bool, error) {
	if name == "" {
		return nil, false, errors.New("flowd client: PutSchedule: the schedule name is empty")
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, false, fmt.Errorf("flowd client: encoding schedule: %w", err)
	}
	var out api.Schedule
	status, _, err := c.send(ctx, c.http, http.MethodPut, schedulePath(name), nil, body, "application/json", &out)
	if err != nil {
		return nil, false, err
	}
	return &out, status == http.StatusCreated, nil
}

// ListSchedules returns every schedule by name.
func (c *Client) ListSchedules(ctx context.Context) ([]api.Schedule, error) {
	var out api.ListSchedulesResponse
	if _, err := c.do(ctx, http.MethodGet, "/v1/schedules", nil, nil, "", &out); err != nil {
		return nil, err
	}
	if out.Schedules == nil {
		out.Schedules = []api.Schedule{}
	}
	return out.Schedules, nil
}

// GetSchedule returns the schedule name with its next fire times.
func (c *Client) GetSchedule(ctx context.Context, name string) (*api.Schedule, error) {
	if name == "" {
		return nil, errors.New("flowd client: GetSchedule: the schedule name is empty")
	}
	var out api.Schedule
	if _, err := c.do(ctx, http.MethodGet, schedulePath(name), nil, nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteSchedule deletes the schedule name (not its instances).
func (c *Client) DeleteSchedule(ctx context.Context, name string) error {
	if name == "" {
		return errors.New("flowd client: DeleteSchedule: the schedule name is empty")
	}
	_, err := c.do(ctx, http.MethodDelete, schedulePath(name), nil, nil, "", nil)
	return err
}

// PauseSchedule pauses (or, with paused false, resumes) the schedule name.
func (c *Client) PauseSchedule(ctx context.Context, name string, paused bool) (*api.Schedule, error) {
	if name == "" {
		return nil, errors.New("flowd client: PauseSchedule: the schedule name is empty")
	}
	action := "/pause"
	if !paused {
		action = "/resume"
	}
	var out api.Schedule
	if _, err := c.do(ctx, http.MethodPost, schedulePath(name)+action, nil, []byte(`{}`), "application/json", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// TriggerSchedule starts an instance of the schedule name now.
func (c *Client) TriggerSchedule(ctx context.Context, name string) (*instance.Instance, error) {
	if name == "" {
		return nil, errors.New("flowd client: TriggerSchedule: the schedule name is empty")
	}
	return c.instance(ctx, http.MethodPost, schedulePath(name)+"/trigger", nil, []byte(`{}`), "application/json")
}

// BackfillSchedule starts the instances of the schedule's fire times in
// [from, to].
func (c *Client) BackfillSchedule(ctx context.Context, name string, from, to time.Time) (*api.BackfillResponse, error) {
	if name == "" {
		return nil, errors.New("flowd client: BackfillSchedule: the schedule name is empty")
	}
	body, err := json.Marshal(api.BackfillRequest{From: from.Format(time.RFC3339), To: to.Format(time.RFC3339)})
	if err != nil {
		return nil, fmt.Errorf("flowd client: encoding backfill: %w", err)
	}
	var out api.BackfillResponse
	if _, err := c.do(ctx, http.MethodPost, schedulePath(name)+"/backfill", nil, body, "application/json", &out); err != nil {
		return nil, err
	}
	return &out, nil
}
