// Command go-worker is a remote flowd worker written in Go: it serves the
// task handler "greet" to a running flowd server over its tasks API.
//
// With a server running (`flowd serve`):
//
//	go run ./examples/go-worker                 # FLOWD_SERVER, FLOWD_TOKEN as for the CLI
//	flowd def apply examples/go-worker/greeting.yaml
//	flowd start greeting --input '{"name": "ana"}'
//	flowd get <id>                              # step hello: "hello, ana"
//
// Ctrl-C (or SIGTERM) stops it gracefully: it polls no more, and the tasks
// it runs finish and are reported first.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/flowd/flowd/client"
	"github.com/flowd/flowd/worker"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "go-worker:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	server := os.Getenv("FLOWD_SERVER")
	if server == "" {
		server = "http://127.0.0.1:8080"
	}
	var opts []client.Option
	if token := os.Getenv("FLOWD_TOKEN"); token != "" {
		opts = append(opts, client.WithToken(token))
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))

	w := worker.New(client.New(server, opts...), worker.Options{
		Concurrency: 4,
		Logger:      logger,
	})
	w.Handle("greet", greet)
	logger.Info("serving handler greet", "server", server)
	return w.Run(ctx) // until Ctrl-C / SIGTERM
}

// greet answers {"name": N} with "hello, N". Bad input cannot get better by
// retrying, so it fails the step at once (worker.Permanent).
func greet(ctx context.Context, t worker.Task) (json.RawMessage, error) {
	var in struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(t.Input, &in); err != nil || in.Name == "" {
		return nil, worker.Permanent(errors.New(`greet needs input {"name": "…"}`))
	}
	return json.Marshal("hello, " + in.Name)
}
