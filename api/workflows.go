package api

import (
	"encoding/json"

	"github.com/flowd/flowd/workflow/instance"
)

// CreateWorkflowRequest is the body of POST /v1/workflows.
type CreateWorkflowRequest struct {
	ID         string          `json:"id,omitempty"`
	Definition string          `json:"definition,omitempty"`
	Input      json.RawMessage `json:"input,omitempty"`
	State      json.RawMessage `json:"state,omitempty"`
	// Priority (1–5) overrides the definition's; absent keeps it.
	Priority *int `json:"priority,omitempty"`
	// Search are search attributes (name → a string, a number or a
	// boolean) over the definition's of the same name.
	Search map[string]json.RawMessage `json:"search,omitempty"`
}

// ListWorkflowsResponse is the body of GET /v1/workflows. A page may hold
// fewer workflows than its limit (it ends early at the server's page byte
// bound); only an empty NextCursor means the last page.
type ListWorkflowsResponse struct {
	Workflows  []*instance.Instance `json:"workflows"`
	NextCursor string               `json:"next_cursor,omitempty"`
}

// TransitionRequest is the body of POST /v1/workflows/{id}/status.
type TransitionRequest struct {
	From instance.Status `json:"from"`
	To   instance.Status `json:"to"`
}

// CompleteStepRequest is the body of POST /v1/workflows/{id}/steps/{step}/complete.
type CompleteStepRequest struct {
	Output json.RawMessage `json:"output"`
}

// BatchStatusRequest is the body of POST /v1/batch/status.
type BatchStatusRequest struct {
	Status        instance.Status `json:"status"`
	UpdatedBefore string          `json:"updated_before"`
	NewStatus     instance.Status `json:"new_status"`
	Limit         *int            `json:"limit"`
}

// BatchStatusResponse is the body of a successful batch.
type BatchStatusResponse struct {
	IDs []string `json:"ids"`
}

// HistoryResponse is the body of GET /v1/workflows/{id}/history: versions
// from ?since= on, oldest first. NextSince, present only when more
// versions exist, is the since of the next page.
type HistoryResponse struct {
	Versions  []instance.HistoryEntry `json:"versions"`
	NextSince *int64                  `json:"next_since,omitempty"`
}
