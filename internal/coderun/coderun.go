// Package coderun is what code workflows run in process record through:
// the engine itself, as a worker.RunBackend, with no HTTP hop. An embedded
// server (server.Server.RegisterWorkflow) and `flowd bench --scenario code`
// both use it; it is a package of its own because engine must not import
// the SDK (worker), and bench must not import server.
package coderun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/worker"
)

// Backend is the worker.RunBackend of runs that eng delivers in process:
// register worker.WorkflowHandler(w, Backend(eng)) on eng under the code
// definition's handler.
func Backend(eng *engine.Engine) worker.RunBackend { return runs{eng} }

// runs records a run's steps, waits and variables through the engine.
type runs struct{ eng *engine.Engine }

// lost marks the engine's answers that say the run no longer holds its
// lease (a remote worker gets 409 for them).
func lost(err error) error {
	if errors.Is(err, engine.ErrLeaseLost) || errors.Is(err, engine.ErrNotRunning) || errors.Is(err, engine.ErrNonDeterminism) {
		return fmt.Errorf("%w: %w", worker.ErrCancelled, err)
	}
	return err
}

func (r runs) Checkpoint(ctx context.Context, taskID, name string, req api.CheckpointRequest) (*api.JournalEntry, error) {
	rec, err := engine.RecordedOf(req)
	if err != nil {
		return nil, err
	}
	st, err := r.eng.Checkpoint(ctx, taskID, req.Lease, name, rec)
	if err != nil {
		return nil, lost(err)
	}
	raw, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	var entry api.JournalEntry
	if err := json.Unmarshal(raw, &entry); err != nil {
		return nil, err
	}
	return &entry, nil
}

func (r runs) Suspend(ctx context.Context, taskID, lease string, waits map[string]api.Wait) error {
	ws, err := engine.WaitsOf(waits)
	if err != nil {
		return err
	}
	return lost(r.eng.Suspend(ctx, taskID, lease, ws))
}

func (r runs) SetVariable(ctx context.Context, taskID, lease, key string, value json.RawMessage) error {
	return lost(r.eng.SetVariable(ctx, taskID, lease, key, value))
}

func (r runs) SetSearch(ctx context.Context, taskID, lease, name string, value json.RawMessage) error {
	return lost(r.eng.SetSearch(ctx, taskID, lease, name, value))
}
