package main

// The commands around remote execution: `flowd def` manages the definitions
// that workflows are started from, and `flowd worker` runs their task steps
// over the tasks API.

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v2"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/client"
	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/worker"
	"github.com/flowd/flowd/workflow"
)

func newDefCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "def",
		Short: "Manage workflow definitions (apply, list, get, delete)",
		Long: `def manages the workflow definitions of a server: the DAGs of steps that
"flowd start DEFINITION" creates workflows from (YAML or JSON; see docs/definitions.md),
or Serverless Workflow 1.0 documents (docs/serverless-workflow.md).`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newDefApplyCmd(e), newDefListCmd(e), newDefGetCmd(e), newDefDeleteCmd(e))
	return cmd
}

func newDefApplyCmd(e *env) *cobra.Command {
	var o clientOptions
	cmd := &cobra.Command{
		Use:   "apply FILE",
		Short: "Store a definition from a YAML or JSON file",
		Long: `apply stores the definition in FILE ("-" reads stdin) under the name the file
gives it: its name, or document.name for a Serverless Workflow 1.0 document
(docs/serverless-workflow.md). A definition that differs from the stored one becomes its next
revision; the same definition again changes nothing ("unchanged"). Workflows
already started keep the revision they were started with.

An invalid definition is rejected with every problem listed, one a line
(exit 1), and nothing is stored.
` + clientHelp,
		Example: `  flowd def apply order.yaml
  flowd def apply greet.sw.yaml     # a Serverless Workflow document
  flowd def get order | sed 's/max_attempts: 3/max_attempts: 5/' | flowd def apply -`,
		Args: exactArgs("FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := readDefinitionFile(e, args[0])
			if err != nil {
				return err
			}
			source := args[0]
			if source == "-" {
				source = "stdin"
			}
			name, err := definitionName(data, source)
			if err != nil {
				return err
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			resp, created, err := c.PutDefinition(cmd.Context(), name, data)
			if err != nil {
				var ae *client.APIError
				if errors.As(err, &ae) && ae.StatusCode == 400 {
					problems := ae.Problems
					if len(problems) == 0 {
						problems = []string{ae.Message}
					}
					return invalidDefinition(fmt.Sprintf("definition %q", name), problems)
				}
				return o.apiFailure(err)
			}
			if o.json() {
				return printJSON(e.stdout, resp)
			}
			what := "unchanged"
			if created {
				what = "created"
			}
			_, err = fmt.Fprintf(e.stdout, "definition %s revision %d (%s)\n", clean(resp.Name), resp.Revision, what)
			return err
		},
	}
	o.bind(cmd, e)
	return cmd
}

// readDefinitionFile reads FILE, or stdin for "-", up to the server's body limit.
func readDefinitionFile(e *env, path string) ([]byte, error) {
	var r io.Reader = e.stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err // *PathError names the file
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, api.MaxBodyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if len(data) > api.MaxBodyBytes {
		return nil, usageError("%s is larger than %d bytes, the most the server accepts", path, api.MaxBodyBytes)
	}
	return data, nil
}

// definitionName finds the name the definition gives itself, which is where
// it is PUT: `name` for a flowd definition, `document.name` for a Serverless
// Workflow document. The server validates the definition; only one without a
// usable name is judged here, by the same parser, so every problem is still
// listed.
func definitionName(data []byte, source string) (string, error) {
	if name, ok, err := serverlessWorkflowName(data, source); ok {
		return name, err
	}
	def, err := workflow.ParseDefinition(data)
	if err == nil {
		return def.Name, nil
	}
	var doc struct {
		Name any `yaml:"name"`
	}
	if yaml.Unmarshal(data, &doc) == nil {
		if name, ok := doc.Name.(string); ok && strings.TrimSpace(name) != "" {
			return name, nil
		}
	}
	var de *workflow.DefinitionError
	if errors.As(err, &de) {
		return "", invalidDefinition("the definition in "+source, de.Problems)
	}
	return "", fmt.Errorf("the definition in %s has no name: %w", source, err)
}

// serverlessWorkflowName returns document.name when data is a Serverless
// Workflow document, recognised as the server does: a top-level mapping
// whose document.dsl is a string starting with "1.0". ok is false for
// anything else, which is then read as a flowd definition.
func serverlessWorkflowName(data []byte, source string) (name string, ok bool, err error) {
	var doc struct {
		Document *struct {
			DSL  any `yaml:"dsl"`
			Name any `yaml:"name"`
		} `yaml:"document"`
	}
	if yaml.Unmarshal(data, &doc) != nil || doc.Document == nil {
		return "", false, nil
	}
	if dsl, isString := doc.Document.DSL.(string); !isString || !strings.HasPrefix(dsl, "1.0") {
		return "", false, nil
	}
	if name, isString := doc.Document.Name.(string); isString && strings.TrimSpace(name) != "" {
		return name, true, nil
	}
	return "", true, invalidDefinition("the Serverless Workflow document in "+source, []string{"/document/name: is required"})
}

// invalidDefinition is the error of a rejected definition: every problem on
// a line of its own.
func invalidDefinition(what string, problems []string) error {
	var b strings.Builder
	n := len(problems)
	fmt.Fprintf(&b, "%s is invalid (%d problem%s):", what, n, map[bool]string{true: "s"}[n != 1])
	for _, p := range problems {
		b.WriteString("\n  " + clean(p))
	}
	return errors.New(b.String())
}

func newDefListCmd(e *env) *cobra.Command {
	var o clientOptions
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List definitions with their latest revision",
		Long: `list prints every definition's latest revision as a table; -o json prints the
API's response.
` + clientHelp,
		Example: `  flowd def list
  flowd def list -o json | jq -r '.definitions[].name'`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			defs, err := c.ListDefinitions(cmd.Context())
			if err != nil {
				return o.apiFailure(err)
			}
			if o.json() {
				return printJSON(e.stdout, api.ListDefinitionsResponse{Definitions: defs})
			}
			if len(defs) == 0 {
				fmt.Fprintln(e.stderr, "no definitions found")
				return nil
			}
			tw := newTable(e.stdout)
			fmt.Fprintln(tw, "NAME\tREVISION\tSTEPS\tTIMEOUT\tCREATED")
			for _, raw := range defs {
				d, err := engine.DefinitionFromAPI(raw)
				if err != nil {
					return err
				}
				steps, timeout := "-", "-"
				if d.Definition != nil {
					steps = strconv.Itoa(len(d.Definition.Steps))
					if c := d.Definition.Code; c != nil {
						// Its code records its steps as it runs.
						steps = "code: " + clean(c.Handler)
					}
					if d.Definition.Serverless != nil {
						steps, timeout = serverlessSummary(d.Definition.Serverless)
					}
					if d.Definition.Timeout > 0 {
						timeout = d.Definition.Timeout.String()
					}
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", clean(d.Name), d.Revision, steps, timeout, timestamp(d.CreatedAt))
			}
			return tw.Flush()
		},
	}
	o.bind(cmd, e)
	return cmd
}

func newDefGetCmd(e *env) *cobra.Command {
	var o clientOptions
	var revision int
	cmd := &cobra.Command{
		Use:   "get NAME [--revision N]",
		Short: "Show a definition",
		Long: `get prints a definition, by default its latest revision, as YAML that
"flowd def apply" accepts back; -o json prints it as the API returns it.
` + clientHelp,
		Example: `  flowd def get order
  flowd def get order --revision 1 -o json`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("revision") && revision < 1 {
				return usageError("--revision must be a positive number, not %d", revision)
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			info, err := c.GetDefinition(cmd.Context(), args[0], revision)
			if err != nil {
				return o.apiFailure(err)
			}
			if o.json() {
				return printJSON(e.stdout, info)
			}
			return printDefinition(e.stdout, info)
		},
	}
	cmd.Flags().IntVar(&revision, "revision", 0, "show this revision (default: the latest)")
	o.bind(cmd, e)
	return cmd
}

func newWorkerCmd(e *env) *cobra.Command {
	var o clientOptions
	var names, commands []string
	var concurrency int
	var name, logLevel string
	var lease time.Duration
	demo := worker.DemoHandlers()
	available := strings.Join(slices.Sorted(maps.Keys(demo)), ", ")
	cmd := &cobra.Command{
		Use:   "worker [--handler NAME=COMMAND]... [--handlers NAMES]",
		Short: "Run task steps for a server, as a remote worker",
		Long: `worker serves handlers to the server over its tasks API: it long-polls for
task steps whose handler it serves, runs them, and reports each result, one log
line a task on stderr.

--handler NAME=COMMAND (repeatable) serves your own code: each task runs
sh -c COMMAND with
  stdin         the step's input JSON
  environment   the worker's, plus FLOWD_WORKFLOW_ID, FLOWD_STEP, FLOWD_ATTEMPT
                and FLOWD_IDEMPOTENCY_KEY (the same for every attempt of a step)
  stdout        the step's output: JSON, or nothing for null (anything else
                fails the step)
  exit status   0 completes the step; any other fails the attempt, which is
                retried per the step's retry policy; ` + strconv.Itoa(worker.ExitPermanent) + ` fails the step at
                once. The last 4 KB of stderr are the error.
When an attempt ends before its command does (the lease lost, the step's
timeout, the worker abandoning it at shutdown), the command and the processes
it started get SIGTERM, then SIGKILL.

--handlers NAMES serves built-in demo handlers, comma-separated:
  echo   returns its input
  sleep  waits input.ms milliseconds and returns {"slept_ms": N}
  fail   fails with input.message (not retried when input.permanent is true)
The two flags may be combined; at least one handler is required, and each
handler name is served once.

Each task is leased for --lease (default: the server's --lease) and the lease is
renewed while the handler runs; a worker that dies loses its tasks when their
leases expire, and they run again. On SIGINT or SIGTERM the worker stops
polling, lets the tasks in flight finish for up to 10s, and exits 0.

A server that cannot be reached at start is an error (exit 1). Once the worker
has reached it, it retries through an outage, logging when it begins and ends.

Connection: --server (env FLOWD_SERVER, default ` + defaultServer + `) and
--token (env FLOWD_TOKEN).`,
		Example: `  flowd worker --handler greet='python3 examples/hello/greet.py'
  flowd worker --handler resize='./resize.sh' --handler notify='node notify.js' --concurrency 8
  flowd worker --handlers echo,sleep,fail
  flowd worker --handlers sleep --concurrency 16 --lease 1m --server http://10.0.0.5:8080`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			hs, err := workerHandlers(demo, names, commands)
			if err != nil {
				return err
			}
			if concurrency < 1 {
				return usageError("--concurrency must be at least 1, not %d", concurrency)
			}
			if lease != 0 && (lease < time.Second || lease > time.Hour) {
				return usageError("--lease must be from 1s to 1h (or 0 for the server's default), not %s", lease)
			}
			level, err := parseLevel(logLevel)
			if err != nil {
				return &exitCodeError{code: exitUsage, err: err}
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level}))
			err = worker.Run(cmd.Context(), worker.Config{
				Client: c, Name: name, Handlers: hs, Concurrency: concurrency, Lease: lease, Logger: log,
			})
			if err != nil {
				return o.apiFailure(err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&commands, "handler", nil, "serve handler NAME by running sh -c COMMAND for each task (repeatable)")
	f.StringSliceVar(&names, "handlers", nil, "demo handlers to serve, comma-separated: "+available)
	f.IntVar(&concurrency, "concurrency", worker.DefaultConcurrency, "tasks run at once")
	f.StringVar(&name, "name", "", "worker name, shown as the lease owner (default HOSTNAME-PID)")
	f.DurationVar(&lease, "lease", 0, "lease asked for each task, 1s–1h (default: the server's)")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&o.server, "server", defaultServer, "URL of the flowd server (env FLOWD_SERVER)")
	f.StringVar(&o.token, "token", "", "bearer token, for a server started with --token-file (env FLOWD_TOKEN)")
	o.format, o.formatFlag = "text", "output"
	// Only the connection comes from the environment, as for the other
	// client commands.
	cmd.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		return applyEnv(cmd, o.getenv(e.getenv))
	}
	return cmd
}

// workerHandlers builds the handlers of flowd worker: the demo handlers named
// by --handlers and the commands of --handler NAME=COMMAND. Each name may be
// served once, and at least one must be.
func workerHandlers(demo map[string]worker.Handler, names, commands []string) (map[string]worker.Handler, error) {
	available := strings.Join(slices.Sorted(maps.Keys(demo)), ", ")
	hs := map[string]worker.Handler{}
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		h, ok := demo[n]
		if !ok {
			return nil, usageError("--handlers: unknown handler %q (available: %s; serve your own with --handler NAME=COMMAND)", n, available)
		}
		hs[n] = h
	}
	fromCommand := map[string]bool{}
	for _, v := range commands {
		n, command, ok := strings.Cut(v, "=")
		n = strings.TrimSpace(n)
		switch {
		case !ok || n == "":
			return nil, usageError("--handler %q: want NAME=COMMAND, e.g. --handler greet='python3 greet.py'", v)
		case workflow.HandlerNameProblem(n) != "":
			return nil, usageError("--handler %q: the name %s", v, workflow.HandlerNameProblem(n))
		case strings.HasPrefix(n, "flowd:"):
			return nil, usageError("--handler %q: names starting with flowd: are the server's own steps", v)
		case strings.TrimSpace(command) == "":
			return nil, usageError("--handler %q: the command is empty", v)
		case fromCommand[n]:
			return nil, usageError("--handler %s is given twice: each handler name runs one command", n)
		case hs[n] != nil:
			return nil, usageError("handler %q is given by both --handlers and --handler: each handler name is served once", n)
		}
		fromCommand[n] = true
		hs[n] = worker.Command(command)
	}
	if len(hs) == 0 {
		return nil, usageError("no handler to serve: name your own with --handler NAME=COMMAND, or demo handlers with --handlers (available: %s)", available)
	}
	return hs, nil
}
