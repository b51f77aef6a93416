package api

import (
	"encoding/json"
	"time"
)

// PutScheduleRequest is the body of PUT /v1/schedules/{name}.
type PutScheduleRequest struct {
	Definition string          `json:"definition"`
	Cron       string          `json:"cron"`
	Timezone   string          `json:"timezone,omitempty"`
	Input      json.RawMessage `json:"input,omitempty"`
	Overlap    string          `json:"overlap,omitempty"`
	Paused     bool            `json:"paused,omitempty"`
	// CatchupWindow is a Go duration ("1m", the default, "90s", "2h").
	CatchupWindow string `json:"catchup_window,omitempty"`
}

// Schedule is a schedule as the API shows it. NextFireTimes are the next
// fire times after now, in UTC (RFC 3339), shown for a paused schedule too
// (when it would fire once resumed).
type Schedule struct {
	Name           string          `json:"name"`
	Definition     string          `json:"definition"`
	Cron           string          `json:"cron"`
	Timezone       string          `json:"timezone"`
	Input          json.RawMessage `json:"input"`
	Overlap        string          `json:"overlap"`
	Paused         bool            `json:"paused"`
	CatchupWindow  string          `json:"catchup_window"`
	NextFireTimes  []time.Time     `json:"next_fire_times"`
	LastFireAt     *time.Time      `json:"last_fire_at,omitempty"`
	LastInstanceID string          `json:"last_instance_id,omitempty"`
	BufferedFireAt *time.Time      `json:"buffered_fire_at,omitempty"`
	CreatedAt      time.Time       `json:"created_at"`
	UpdatedAt      time.Time       `json:"updated_at"`
}

// ListSchedulesResponse is the body of GET /v1/schedules.
type ListSchedulesResponse struct {
	Schedules []Schedule `json:"schedules"`
}

// BackfillRequest is the body of POST /v1/schedules/{name}/backfill.
type BackfillRequest struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// BackfillResponse answers a backfill: the ids it created and those that
// existed already, by fire time.
type BackfillResponse struct {
	Created  []string `json:"created"`
	Existing []string `json:"existing"`
}
