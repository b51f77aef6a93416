package server

import (
	"context"
	"fmt"

	"github.com/flowd/flowd/internal/coderun"
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
	return s.Register(name, worker.WorkflowHandler(w, coderun.Backend(s.eng)))
}
