// Package swcall: PLACEHOLDER, replaced at merge.
package swcall

import (
	"context"
	"encoding/json"
	"net/http"
)

type Result struct {
	Output json.RawMessage
	Error  *Error
}

type Error struct {
	Type     string `json:"type"`
	Status   int    `json:"status"`
	Title    string `json:"title,omitempty"`
	Detail   string `json:"detail,omitempty"`
	Instance string `json:"instance"`
}

func Do(ctx context.Context, client *http.Client, input json.RawMessage) Result { return Result{} }
