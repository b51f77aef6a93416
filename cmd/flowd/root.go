package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Exit codes of every command: scripts branch on them.
const (
	exitOK           = 0
	exitError        = 1
	exitUsage        = 2
	exitPrecondition = 3
	exitNotFound     = 4
)

// env is what a command may touch of the outside world, injected so tests can
// run commands in-process with buffers and a fake environment.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) (string, bool)
	// terminal reports whether stdin is a terminal a person can answer a
	// question on; nil means it is not.
	terminal func() bool
	// now is the clock of commands that judge how old a time is; nil is
	// time.Now.
	now func() time.Time
}

func (e *env) interactive() bool { return e.terminal != nil && e.terminal() }

func (e *env) clock() time.Time {
	if e.now == nil {
		return time.Now()
	}
	return e.now()
}

// exitError carries a specific exit code out of a command.
type exitCodeError struct {
	code int
	err  error
}

func (e *exitCodeError) Error() string { return e.err.Error() }
func (e *exitCodeError) Unwrap() error { return e.err }

func usageError(format string, args ...any) error {
	return &exitCodeError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

func run(ctx context.Context, args []string, e *env) int {
	root := newRootCmd(e)
	codeRunErrors(root)
	root.SetArgs(args)
	root.SetIn(e.stdin)
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(e.stderr, "flowd: %v\n", err)
	var ce *exitCodeError
	if errors.As(err, &ce) {
		return ce.code
	}
	if isUsageErr(err) {
		return exitUsage
	}
	return exitError
}

// codeRunErrors gives every error a command's RunE returns without a code
// of its own exit 1. Usage (2) is decided where the CLI checks its own
// arguments and flags, before any request: a server's message is never
// read for it, whatever words it holds ("invalid argument" …).
func codeRunErrors(cmd *cobra.Command) {
	if runE := cmd.RunE; runE != nil {
		cmd.RunE = func(c *cobra.Command, args []string) error {
			err := runE(c, args)
			var ce *exitCodeError
			if err == nil || errors.As(err, &ce) {
				return err
			}
			return &exitCodeError{code: exitError, err: err}
		}
	}
	for _, sub := range cmd.Commands() {
		codeRunErrors(sub)
	}
}

// isUsageErr recognises cobra's own argument errors (an unknown command, a
// required flag), which carry no type of their own; they come before any
// command runs.
func isUsageErr(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "invalid argument", "flag needs an argument", "accepts ", "requires at least", "requires at most", "required flag"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

func newRootCmd(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:   "flowd",
		Short: "flowd — a workflow orchestrator whose state is never lost under concurrency",
		Long: `flowd runs workflows whose every state change is one atomic, versioned write.

Start a server with the embedded SQLite database:
  flowd serve
Point it at PostgreSQL to run several nodes on one database:
  flowd serve --db postgres://user:pass@host/db

The flags of serve and migrate can also be set through the environment as
FLOWD_<FLAG> (e.g. FLOWD_DB, FLOWD_TOKEN_FILE); client commands read FLOWD_SERVER,
FLOWD_TOKEN and FLOWD_OUTPUT.`,
		Version:       buildVersion(),
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return applyEnv(cmd, e.getenv)
		},
		// flowd alone is a usage error (exit 2): the help goes to stderr.
		// flowd --help prints it on stdout and exits 0.
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(e.stderr)
			_ = cmd.Help()
			return usageError("no command given: flowd serve runs the server; flowd --help lists every command")
		},
	}
	root.SetVersionTemplate("flowd {{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &exitCodeError{code: exitUsage, err: err}
	})
	root.AddCommand(newMigrateCmd(e), newServeCmd(e), newDefCmd(e), newWorkerCmd(e))
	root.AddCommand(newScheduleCmd(e))
	root.AddCommand(newBulkCmd(e))
	root.AddCommand(newClientCmds(e)...)
	root.AddCommand(newBenchCmd(e), newDemoCmd(e), newVersionCmd(e))
	return root
}

// applyEnv fills every flag not given on the command line from FLOWD_<NAME>,
// so `--db` falls back to FLOWD_DB and `--token-file` to FLOWD_TOKEN_FILE.
func applyEnv(cmd *cobra.Command, getenv func(string) (string, bool)) error {
	var errs []error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Changed {
			return
		}
		name := envName(f.Name)
		if v, ok := getenv(name); ok {
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, usageError("%s=%q: %v", name, v, err))
			}
		}
	})
	return errors.Join(errs...)
}
