// Command shell-worker serves a shell command as a flowd task handler from a
// Go program: what `flowd worker --handler NAME=COMMAND` does, written with
// the worker package, to start from when the worker should live in your own
// binary (more handlers, Go ones beside commands, your own flags).
//
//	go run ./examples/shell-worker -handler greet -command 'python3 examples/hello/greet.py'
//
// Each task runs `sh -c COMMAND` with the step's input JSON on stdin; the
// JSON the command prints is the step's output (see worker.Command). It stops
// on SIGINT or SIGTERM once the tasks in flight are done.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/flowd/flowd/client"
	"github.com/flowd/flowd/worker"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}

// run is main with its outside world passed in; it returns the exit status:
// 0 once stopped by ctx, 1 on an error, 2 on a usage error.
func run(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("shell-worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", envOr("FLOWD_SERVER", "http://127.0.0.1:8080"), "URL of the flowd server (env FLOWD_SERVER)")
	token := fs.String("token", os.Getenv("FLOWD_TOKEN"), "bearer token, for a server with tokens (env FLOWD_TOKEN)")
	name := fs.String("handler", "", "the handler name the steps use (required)")
	command := fs.String("command", "", "the command run with sh -c for each task (required)")
	concurrency := fs.Int("concurrency", worker.DefaultConcurrency, "tasks run at once")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "shell-worker: unexpected arguments %q\n", fs.Args())
		return 2
	case *name == "" || *command == "":
		fmt.Fprintln(stderr, "shell-worker: -handler and -command are required, e.g. -handler greet -command 'python3 greet.py'")
		return 2
	}

	var opts []client.Option
	if *token != "" {
		opts = append(opts, client.WithToken(*token))
	}
	err := worker.Run(ctx, worker.Config{
		Client:      client.New(*server, opts...),
		Handlers:    map[string]worker.Handler{*name: worker.Command(*command)},
		Concurrency: *concurrency,
		Logger:      slog.New(slog.NewTextHandler(stderr, nil)),
	})
	if err != nil {
		fmt.Fprintf(stderr, "shell-worker: %v\n", err)
		return 1
	}
	return 0
}

func envOr(name, fallback string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return fallback
}
