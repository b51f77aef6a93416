// Package worker runs Go code for the task steps of flowd workflows in a
// process of its own: a remote worker that long-polls a flowd server over
// its tasks API, runs the handler registered for each task's handler name,
// keeps the task's lease alive with heartbeats, and reports the output or
// the error.
//
//	w := worker.New(client.New("http://127.0.0.1:8080"), worker.Options{Concurrency: 8})
//	w.Handle("charge", func(ctx context.Context, t worker.Task) (json.RawMessage, error) {
//		var in struct{ Amount int }
//		if err := json.Unmarshal(t.Input, &in); err != nil {
//			return nil, worker.Permanent(err) // retrying cannot fix bad input
//		}
//		// t.IdempotencyKey is the same for every attempt of the step.
//		return json.RawMessage(`{"charged": true}`), nil
//	})
//	err := w.Run(ctx) // until ctx ends; tasks in flight then finish
//
// A step `{id: pay, type: task, handler: charge}` of a definition then runs on
// this worker. Handlers run at least once: side effects should be keyed on
// Task.IdempotencyKey. To run handlers inside the server process instead,
// see the server package.
//
// Command turns any program into a handler (`flowd worker --handler
// NAME=COMMAND` is built on it), and the package also holds the demo handlers
// of `flowd worker` (echo, sleep, fail). It runs handlers; it never touches
// the store.
package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// DemoHandlers returns the built-in demo handlers by name:
//   - echo returns its input;
//   - sleep waits input.ms milliseconds (at most an hour) and returns {"slept_ms": N};
//   - fail fails with input.message (retryable unless input.permanent is true).
func DemoHandlers() map[string]Handler {
	return map[string]Handler{
		"echo":  Echo,
		"sleep": Sleep,
		"fail":  Fail,
	}
}

// Echo returns the task's input unchanged.
func Echo(_ context.Context, t Task) (json.RawMessage, error) {
	return t.Input, nil
}

// Sleep waits input.ms milliseconds, or until ctx ends.
func Sleep(ctx context.Context, t Task) (json.RawMessage, error) {
	var in struct {
		MS *float64 `json:"ms"`
	}
	if err := json.Unmarshal(t.Input, &in); err != nil || in.MS == nil || *in.MS < 0 || *in.MS > float64(time.Hour/time.Millisecond) {
		return nil, Permanent(errors.New(`sleep needs input {"ms": N} with 0 <= N <= 3600000`))
	}
	d := time.Duration(*in.MS * float64(time.Millisecond))
	select {
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	case <-time.After(d):
	}
	return json.Marshal(map[string]float64{"slept_ms": *in.MS})
}

// Fail fails with input.message; input.permanent: true makes it not retryable.
func Fail(_ context.Context, t Task) (json.RawMessage, error) {
	var in struct {
		Message   string `json:"message"`
		Permanent bool   `json:"permanent"`
	}
	_ = json.Unmarshal(t.Input, &in)
	if in.Message == "" {
		in.Message = fmt.Sprintf("fail handler: attempt %d failed as asked", t.Attempt)
	}
	if in.Permanent {
		return nil, Permanent(errors.New(in.Message))
	}
	return nil, errors.New(in.Message)
}
