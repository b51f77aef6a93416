// Package sw: PLACEHOLDER of the interpreter's API, replaced at merge.
package sw

import (
	"encoding/json"
	"errors"
	"strings"
	"time"
)

func IsDocument(data []byte) bool { return strings.Contains(string(data), "dsl") }

type Problems struct{ List []string }

func (p *Problems) Error() string        { return strings.Join(p.List, "; ") }
func (p *Problems) Is(target error) bool { return target == ErrInvalid }

var ErrInvalid = errors.New("invalid serverless workflow document")
var ErrNotPending = errors.New("not a pending item")

func Parse(data []byte) (*Workflow, error) { return nil, errors.New("placeholder") }

type Workflow struct {
	Name, Namespace, Version, DSL string
	JSON                          json.RawMessage
	Timeout                       time.Duration
}

type Env struct {
	Now        time.Time
	WorkflowID string
	StartedAt  time.Time
	RawInput   json.RawMessage
}

func (w *Workflow) Start(env Env, input json.RawMessage) (*Runtime, Step, error) {
	return nil, Step{}, errors.New("placeholder")
}
func (w *Workflow) Resume(env Env, rt *Runtime, id string, res Result) (Step, error) {
	return Step{}, errors.New("placeholder")
}

type Runtime struct {
	Seq      int              `json:"seq"`
	Context  json.RawMessage  `json:"context,omitempty"`
	PendingM map[string]*Item `json:"pending,omitempty"`
	Err      *Error           `json:"error,omitempty"`
}

func (rt *Runtime) Pending() []Item { return nil }
func (rt *Runtime) Error() *Error   { return rt.Err }

type Step struct {
	Cause     string
	Start     []Item
	Cancel    []string
	Completed bool
	Output    json.RawMessage
	Fault     *Error
}

type ItemKind string

const (
	ItemTick   ItemKind = "tick"
	ItemTimer  ItemKind = "timer"
	ItemCall   ItemKind = "call"
	ItemHTTP   ItemKind = "http"
	ItemEmit   ItemKind = "emit"
	ItemListen ItemKind = "listen"
	ItemChild  ItemKind = "child"
)

type Item struct {
	ID         string          `json:"id"`
	Kind       ItemKind        `json:"kind"`
	Pointer    string          `json:"pointer"`
	Handler    string          `json:"handler,omitempty"`
	Input      json.RawMessage `json:"input,omitempty"`
	RunAt      time.Time       `json:"run_at,omitempty"`
	Event      string          `json:"event,omitempty"`
	Key        string          `json:"key,omitempty"`
	Definition string          `json:"definition,omitempty"`
	Timeout    time.Duration   `json:"timeout,omitempty"`
}

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
