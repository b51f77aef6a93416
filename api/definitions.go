package api

import (
	"encoding/json"
	"time"
)

// DefinitionResponse is the body of a successful PUT /v1/definitions/{name}.
type DefinitionResponse struct {
	Name     string `json:"name"`
	Revision int    `json:"revision"`
}

// DefinitionInfo is one revision of a definition, as GET
// /v1/definitions/{name} shows it: Definition is the definition as stored,
// a Serverless Workflow document or flowd's steps.
type DefinitionInfo struct {
	Name       string          `json:"name"`
	Revision   int             `json:"revision"`
	CreatedAt  time.Time       `json:"created_at"`
	Definition json.RawMessage `json:"definition"`
}

// ListDefinitionsResponse is the body of GET /v1/definitions.
type ListDefinitionsResponse struct {
	Definitions []*DefinitionInfo `json:"definitions"`
}
