// Command peers runs the workloads of `flowd bench` on flowd's peers, on
// the same PostgreSQL, so that scripts/bench-peers can compare them side
// by side:
//
//	peers dbos  --db URL [--clients 8] [--duration 20s]
//	peers river --db URL [--jobs 20000] [--workers 100] [--fetch-cooldown 0]
//	peers rows  --db URL < flowd-bench-line.json
//	peers compare < prefixed-lines
//
// dbos and river print progress on stderr and one JSON line last on
// stdout, with flowd bench's field names; they check their own results and
// exit 1 when errors is not 0. It is a module of its own so that flowd does
// not depend on its peers.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
)

const usage = `usage:
  peers dbos  --db URL [--clients 8] [--duration 20s]   3-step DBOS workflows, RunWorkflow then GetResult per client
  peers river --db URL [--jobs 20000] [--workers 100] [--fetch-cooldown D]   drain a backlog of no-op River jobs
  peers rows  --db URL < LINE                           add the rows a flowd bench run wrote to its JSON line
  peers compare < LINES                                 medians of the pair ratios of scripts/bench-peers' lines
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one subcommand and returns the exit code: 0, 1 when the
// run failed or found errors, 2 for a usage mistake.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	// The peers log through it too: their messages and the progress
	// lines go to stderr, stdout keeps the one result line.
	log := slog.New(slog.NewTextHandler(stderr, nil))
	var (
		res *Result
		err error
	)
	switch args[0] {
	case "dbos":
		var cfg dbosConfig
		if cfg, err = parseDBOS(args[1:], stderr); err != nil {
			return usageError(stderr, err)
		}
		res, err = runDBOS(ctx, cfg, log)
	case "river":
		var cfg riverConfig
		if cfg, err = parseRiver(args[1:], stderr); err != nil {
			return usageError(stderr, err)
		}
		res, err = runRiver(ctx, cfg, log)
	case "rows":
		var cfg rowsConfig
		if cfg, err = parseRows(args[1:], stderr); err != nil {
			return usageError(stderr, err)
		}
		err = runRows(ctx, cfg, stdin, stdout)
	case "compare":
		var rs runs
		if rs, err = readRuns(stdin); err == nil {
			writeComparisons(stdout, rs)
		}
	default:
		fmt.Fprintf(stderr, "unknown subcommand %q\n%s", args[0], usage)
		return 2
	}
	if err != nil {
		log.Error(args[0]+" failed", "err", err)
		return 1
	}
	if res == nil {
		return 0
	}
	if err := res.print(stdout); err != nil {
		log.Error("printing the result", "err", err)
		return 1
	}
	if res.Errors > 0 {
		log.Error(args[0]+" found errors", "errors", res.Errors)
		return 1
	}
	return 0
}

func usageError(stderr io.Writer, err error) int {
	if !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(stderr, "%v\n%s", err, usage)
	}
	return 2
}

// redact hides a URL's password in messages.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "the database URL"
	}
	return u.Redacted()
}
