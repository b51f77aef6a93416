package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/httpapi"
	"github.com/flowd/flowd/server"
)

// A Go program that runs flowd itself, with a step handler in process.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "flowd-example")
	defer os.RemoveAll(dir)

	s, err := server.New(ctx, server.Config{DB: "sqlite:" + filepath.Join(dir, "app.db"), Addr: "127.0.0.1:0"})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	s.Register("double", func(ctx context.Context, t engine.Task) (json.RawMessage, error) {
		var in struct{ N int }
		if err := json.Unmarshal(t.Input, &in); err != nil {
			return nil, engine.Permanent(err)
		}
		return json.Marshal(in.N * 2)
	})
	if err := s.Start(ctx); err != nil {
		log.Fatal(err)
	}

	c := s.Client() // the API at s.URL(); remote workers and the CLI may use it too
	def := `{"name": "math", "steps": [{"id": "twice", "type": "task", "handler": "double", "input": {"n": "{{ .input.n }}"}}]}`
	if _, _, err := c.PutDefinition(ctx, "math", []byte(def)); err != nil {
		log.Fatal(err)
	}
	inst, err := c.CreateWorkflow(ctx, httpapi.CreateWorkflowRequest{Definition: "math", Input: json.RawMessage(`{"n": 21}`)})
	if err != nil {
		log.Fatal(err)
	}
	for inst.Status != "COMPLETED" {
		time.Sleep(20 * time.Millisecond)
		if inst, err = c.GetWorkflow(ctx, inst.ID); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println(inst.Status, string(inst.State.Steps["twice"].Output))

	// Graceful: steps in flight finish and are recorded before it returns.
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := s.Shutdown(sctx); err != nil {
		log.Fatal(err)
	}
	// Output: COMPLETED 42
}
