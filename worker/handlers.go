// Package worker holds handlers — the demo ones (echo, sleep, fail) and
// Command, which runs a shell command for each task — and the loop of a
// remote worker that serves handlers over the tasks API. It runs handlers; it
// never touches the store.
package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/flowd/flowd/engine"
)

// DemoHandlers returns the built-in demo handlers by name:
//   - echo returns its input;
//   - sleep waits input.ms milliseconds (at most an hour) and returns {"slept_ms": N};
//   - fail fails with input.message (retryable unless input.permanent is true).
func DemoHandlers() map[string]engine.Handler {
	return map[string]engine.Handler{
		"echo":  Echo,
		"sleep": Sleep,
		"fail":  Fail,
	}
}

// Echo returns the task's input unchanged.
func Echo(_ context.Context, t engine.Task) (json.RawMessage, error) {
	return t.Input, nil
}

// Sleep waits input.ms milliseconds, or until ctx ends.
func Sleep(ctx context.Context, t engine.Task) (json.RawMessage, error) {
	var in struct {
		MS *float64 `json:"ms"`
	}
	if err := json.Unmarshal(t.Input, &in); err != nil || in.MS == nil || *in.MS < 0 || *in.MS > float64(time.Hour/time.Millisecond) {
		return nil, engine.Permanent(errors.New(`sleep needs input {"ms": N} with 0 <= N <= 3600000`))
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
func Fail(_ context.Context, t engine.Task) (json.RawMessage, error) {
	var in struct {
		Message   string `json:"message"`
		Permanent bool   `json:"permanent"`
	}
	_ = json.Unmarshal(t.Input, &in)
	if in.Message == "" {
		in.Message = fmt.Sprintf("fail handler: attempt %d failed as asked", t.Attempt)
	}
	if in.Permanent {
		return nil, engine.Permanent(errors.New(in.Message))
	}
	return nil, errors.New(in.Message)
}
