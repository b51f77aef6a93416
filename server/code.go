package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/worker"
)

// RegisterWorkflow serves the code workflow name with w in this process:
// its code definition is put now (a new revision only when it changed), and
// its runs run here, recording their steps through the engine with no HTTP
// hop. Like Register, it must be called before Start.
func (s *Server) RegisterWorkflow(ctx context.Context, name string, w worker.Workflow) error {
	if w.Run == nil {
		return fmt.Errorf("server: workflow %q has no Run function", name)
	}
	def, err := w.Definition(name)
	if err != nil {
		return fmt.Errorf("server: workflow %q: %w", name, err)
	}
	if _, _, err := s.eng.PutDefinition(ctx, def); err != nil {
		return fmt.Errorf("server: putting the definition of workflow %q: %w", name, err)
	}
	return s.Register(name, worker.WorkflowHandler(w, engineRuns{s.eng}))
}

// engineRuns is what in-process runs record through: the engine.
type engineRuns struct{ eng *engine.Engine }

// lost marks the engine's answers that say the run no longer holds its
// lease (a remote worker gets 409 for them).
func lost(err error) error {
	if errors.Is(err, engine.ErrLeaseLost) || errors.Is(err, engine.ErrNotRunning) || errors.Is(err, engine.ErrNonDeterminism) {
		return fmt.Errorf("%w: %w", worker.ErrCancelled, err)
	}
	return err
}

func (r engineRuns) Checkpoint(ctx context.Context, taskID, name string, req api.CheckpointRequest) (*api.JournalEntry, error) {
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

func (r engineRuns) Suspend(ctx context.Context, taskID, lease string, waits map[string]api.Wait) error {
	ws, err := engine.WaitsOf(waits)
	if err != nil {
		return err
	}
	return lost(r.eng.Suspend(ctx, taskID, lease, ws))
}

func (r engineRuns) SetVariable(ctx context.Context, taskID, lease, key string, value json.RawMessage) error {
	return lost(r.eng.SetVariable(ctx, taskID, lease, key, value))
}
