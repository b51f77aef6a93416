// Command flowd is the workflow orchestrator: `flowd serve` runs the API, the
// engine and the dashboard; the other subcommands migrate a database or talk to
// a running server. Wiring is by hand, here; the work lives in the packages.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/term"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], &env{
		stdin:  os.Stdin,
		stdout: os.Stdout,
		stderr: os.Stderr,
		getenv: os.LookupEnv,
		terminal: func() bool {
			return term.IsTerminal(int(os.Stdin.Fd())) && term.IsTerminal(int(os.Stderr.Fd()))
		},
	})
	stop()
	os.Exit(code)
}
