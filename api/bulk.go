package api

import (
	"encoding/json"
	"time"
)

// BulkFilter is the filter of a bulk operation: the instances it acts on
// match every field that is set. Search values are strings, numbers or
// booleans, compared as text (a number or boolean as JSON writes it).
// Times are RFC 3339.
type BulkFilter struct {
	Status        string                     `json:"status,omitempty"`
	Definition    string                     `json:"definition,omitempty"`
	Parent        string                     `json:"parent,omitempty"`
	IDPrefix      string                     `json:"id_prefix,omitempty"`
	Search        map[string]json.RawMessage `json:"search,omitempty"`
	CreatedAfter  string                     `json:"created_after,omitempty"`
	CreatedBefore string                     `json:"created_before,omitempty"`
	UpdatedBefore string                     `json:"updated_before,omitempty"`
}

// BulkRequest is the body of POST /v1/bulk.
type BulkRequest struct {
	// Action is cancel, pause, resume, retry or delete.
	Action string     `json:"action"`
	Filter BulkFilter `json:"filter"`
	// Limit, when set (1–10,000,000), caps the instances acted on.
	Limit *int `json:"limit,omitempty"`
}

// BulkCount answers GET /v1/bulk/count: how many instances the filter
// matches now, counted up to a bound (Exact false: at least Count).
type BulkCount struct {
	Count int  `json:"count"`
	Exact bool `json:"exact"`
}

// BulkError is an instance a bulk operation failed on.
type BulkError struct {
	WorkflowID string `json:"workflow_id"`
	Error      string `json:"error"`
}

// BulkOperation is a bulk operation as the API shows it. Matched = Done +
// Skipped + Failed: the instances dealt with so far; Errors holds the
// first 20 failures.
type BulkOperation struct {
	ID         string      `json:"id"`
	Action     string      `json:"action"`
	Filter     BulkFilter  `json:"filter"`
	Limit      int         `json:"limit,omitempty"`
	Status     string      `json:"status"`
	Matched    int         `json:"matched"`
	Done       int         `json:"done"`
	Skipped    int         `json:"skipped"`
	Failed     int         `json:"failed"`
	Errors     []BulkError `json:"errors"`
	Actor      string      `json:"actor,omitempty"`
	CreatedAt  time.Time   `json:"created_at"`
	UpdatedAt  time.Time   `json:"updated_at"`
	FinishedAt *time.Time  `json:"finished_at,omitempty"`
}

// ListBulkResponse is the body of GET /v1/bulk.
type ListBulkResponse struct {
	Operations []BulkOperation `json:"operations"`
}
