// Command embedded runs flowd inside a Go program: the API, the dashboard and
// the engine, with a step handler written in Go that runs in this process. It
// stores a definition, starts a workflow, waits for it to complete, prints
// the result and shuts down gracefully.
//
//	go run ./examples/embedded [-db sqlite:PATH] [-addr 127.0.0.1:0]
//
// While it runs, the server also answers remote workers and the flowd CLI at
// the URL it prints.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/server"
	"github.com/flowd/flowd/workflow"
)

const definition = `
name: shipping
steps:
  - {id: quote, type: task, handler: quote, input: {kg: "{{ .input.kg }}"}}
`

func main() {
	db := flag.String("db", "sqlite:"+filepath.Join(os.TempDir(), "flowd-embedded.db"), "database URL")
	addr := flag.String("addr", "127.0.0.1:0", "listen address (port 0: any free port)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *db, *addr); err != nil {
		fmt.Fprintln(os.Stderr, "embedded:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, db, addr string) error {
	s, err := server.New(ctx, server.Config{DB: db, Addr: addr, ShutdownTimeout: 10 * time.Second})
	if err != nil {
		return err
	}
	defer s.Close()
	// Handlers are registered before Start.
	if err := s.Register("quote", quote); err != nil {
		return err
	}
	if err := s.Start(ctx); err != nil {
		return err
	}
	fmt.Printf("flowd is serving the API at %s/v1 and the dashboard at %s/\n", s.URL(), s.URL())

	c := s.Client()
	if _, _, err := c.PutDefinition(ctx, "shipping", []byte(definition)); err != nil {
		return err
	}
	inst, err := c.CreateWorkflow(ctx, api.CreateWorkflowRequest{Definition: "shipping", Input: json.RawMessage(`{"kg": 3}`)})
	if err != nil {
		return err
	}
	fmt.Println("started workflow", inst.ID)
	for inst.Status == workflow.StatusPending || inst.Status == workflow.StatusRunning {
		// Re-read only when the instance moved on from the version we have.
		next, changed, err := c.GetWorkflowIfChanged(ctx, inst.ID, inst.Version)
		if err != nil {
			return err
		}
		if changed {
			inst = next
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	if inst.Status != workflow.StatusCompleted {
		return fmt.Errorf("workflow %s ended %s", inst.ID, inst.Status)
	}
	fmt.Printf("workflow %s is %s: quote = %s\n", inst.ID, inst.Status, inst.State.Steps["quote"].Output)

	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return s.Shutdown(sctx) // steps in flight would finish and be recorded first
}

// quote prices a parcel: 4.5 per kg. It runs in this process, on the
// engine's workers, each time a workflow reaches a step with handler "quote".
func quote(ctx context.Context, t engine.Task) (json.RawMessage, error) {
	var in struct {
		KG float64 `json:"kg"`
	}
	if err := json.Unmarshal(t.Input, &in); err != nil || in.KG <= 0 {
		return nil, engine.Permanent(errors.New(`quote needs input {"kg": N} with N > 0`))
	}
	return json.Marshal(map[string]float64{"kg": in.KG, "price": in.KG * 4.5})
}
