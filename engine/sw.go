package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/flowd/flowd/engine/rules"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/sw"
	"github.com/flowd/flowd/sw/swcall"
)

// runSWCall performs the http or openapi call of a Serverless Workflow
// task. Whatever the call gives — an output, or a DSL error such as a
// non-2xx answer — completes the task: the workflow decides what an error
// means (its try/catch), not the task's retries.
func (e *Engine) runSWCall(ctx context.Context, t Task) (json.RawMessage, error) {
	res := swcall.Do(ctx, e.http, t.Input)
	return json.Marshal(rules.SWCallResult{Output: res.Output, Error: res.Error})
}

// swEvent is the CloudEvent an emit task publishes.
type swEvent struct {
	ID      string          `json:"id"`
	Type    string          `json:"type"`
	Subject string          `json:"subject"`
	Data    json.RawMessage `json:"data"`
}

// runSWEmit publishes the CloudEvent of an emit task as a flowd event (its
// type the name, its subject the key) under the CloudEvent's id, so that a
// delivery run again after a lost worker does not publish it twice; the
// task's output is the CloudEvent.
func (e *Engine) runSWEmit(ctx context.Context, t Task) (json.RawMessage, error) {
	var ev swEvent
	if err := json.Unmarshal(t.Input, &ev); err != nil {
		return nil, Permanent(fmt.Errorf("emit task input: %w", err))
	}
	_, err := e.publishEvent(ctx, &store.Event{ID: ev.ID, Name: ev.Type, Key: ev.Subject, Data: ev.Data})
	switch {
	case errors.Is(err, store.ErrExists):
		// Published by an earlier delivery of this task.
	case errors.Is(err, store.ErrInvalidArgument):
		return json.Marshal(rules.SWCallResult{Error: &sw.Error{
			Type: sw.ErrorType(sw.KindValidation), Status: 400,
			Title: "Invalid Event", Detail: err.Error(),
		}})
	case err != nil:
		return nil, err
	}
	return json.Marshal(rules.SWCallResult{Output: t.Input})
}
