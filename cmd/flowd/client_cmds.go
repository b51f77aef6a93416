package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/client"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// defaultServer is where client commands look for `flowd serve`.
const defaultServer = "http://127.0.0.1:8080"

// clientTimeout bounds one request of a client command, so a hung server does
// not hang a script; Ctrl-C cancels earlier through the command's context.
const clientTimeout = 60 * time.Second

// clientHelp ends the long help of every client command.
const clientHelp = `
Connection: --server (env FLOWD_SERVER, default ` + defaultServer + `) and
--token (env FLOWD_TOKEN) for a server started with --token-file. FLOWD_OUTPUT
sets the output format. Other flags are never read from the environment: they
describe one request.

Exit status: 0 success, 1 error, 2 usage (bad flag, argument or JSON),
3 precondition failed (the workflow changed: HTTP 412/428), 4 not found.`

// newClientCmds returns the commands that talk to a running server.
func newClientCmds(e *env) []*cobra.Command {
	cmds := []*cobra.Command{
		newStartCmd(e), newGetCmd(e), newListCmd(e), newPatchCmd(e),
		newCompleteCmd(e), newDeleteCmd(e), newHistoryCmd(e), newWorkersCmd(e),
		newEventCmd(e), newDiffCmd(e), newRerunCmd(e),
	}
	for _, a := range actionCmds {
		cmds = append(cmds, newActionCmd(e, a))
	}
	return cmds
}

// clientOptions are the flags every client command shares.
type clientOptions struct {
	server string
	token  string
	format string
	// formatFlag is the long name of the -o flag: "output", except on
	// `complete`, whose --output is the step's output.
	formatFlag string
}

// bind registers the shared flags on cmd and makes cmd read FLOWD_SERVER,
// FLOWD_TOKEN and FLOWD_OUTPUT, and no other variable.
func (o *clientOptions) bind(cmd *cobra.Command, e *env) {
	if o.formatFlag == "" {
		o.formatFlag = "output"
	}
	f := cmd.Flags()
	f.StringVar(&o.server, "server", defaultServer, "URL of the flowd server (env FLOWD_SERVER)")
	f.StringVar(&o.token, "token", "", "bearer token, for a server started with --token-file (env FLOWD_TOKEN)")
	f.StringVarP(&o.format, o.formatFlag, "o", "text", "output format: text or json (env FLOWD_OUTPUT)")
	// This replaces the root's hook, which would fill every flag from
	// FLOWD_<FLAG>: an exported FLOWD_IF_MATCH=* or FLOWD_ID would silently
	// change what each later command does.
	cmd.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		return applyEnv(cmd, o.getenv(e.getenv))
	}
}

func (o *clientOptions) getenv(getenv func(string) (string, bool)) func(string) (string, bool) {
	formatVar := "FLOWD_" + strings.ToUpper(o.formatFlag)
	return func(name string) (string, bool) {
		switch name {
		case "FLOWD_SERVER", "FLOWD_TOKEN":
			return getenv(name)
		case formatVar:
			return getenv("FLOWD_OUTPUT")
		}
		return "", false
	}
}

func (o *clientOptions) json() bool { return o.format == "json" }

// client checks the shared flags and returns a client of the server.
func (o *clientOptions) client() (*client.Client, error) {
	if o.format != "text" && o.format != "json" {
		return nil, usageError("-o/--%s must be text or json, not %q", o.formatFlag, o.format)
	}
	u, err := url.Parse(o.server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageError("--server %q is not a server URL such as %s", o.server, defaultServer)
	}
	opts := []client.Option{client.WithHTTPClient(&http.Client{Timeout: clientTimeout})}
	if o.token != "" {
		opts = append(opts, client.WithToken(o.token))
	}
	return client.New(o.server, opts...), nil
}

// apiFailure gives a failed call its exit code and a message that says what
// to do about it.
func (o *clientOptions) apiFailure(err error) error {
	var ae *client.APIError
	if errors.As(err, &ae) {
		switch ae.StatusCode {
		case http.StatusPreconditionFailed, http.StatusPreconditionRequired:
			return &exitCodeError{code: exitPrecondition, err: err}
		case http.StatusNotFound:
			return &exitCodeError{code: exitNotFound, err: err}
		case http.StatusUnauthorized:
			return fmt.Errorf("%w; pass --token or set FLOWD_TOKEN", err)
		}
		if ae.StatusCode >= 500 && ae.RequestID != "" {
			return fmt.Errorf("%w (request id %s)", err, ae.RequestID)
		}
		return err
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("cannot reach the flowd server at %s (is `flowd serve` running? see --server): %w", o.server, ue.Err)
	}
	return err
}

// exactArgs accepts exactly the named arguments.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != len(names) {
			return usageError("%d arguments given, %d expected: usage: %s (see %s --help)",
				len(args), len(names), strings.TrimSpace(cmd.CommandPath()+" "+strings.Join(names, " ")), cmd.CommandPath())
		}
		return nil
	}
}

// readJSONArg returns value as JSON: "-" reads it from stdin. A value that is
// not JSON, or not an object when object is set, is a usage error.
func readJSONArg(e *env, what, value string, object bool) (json.RawMessage, error) {
	b := []byte(value)
	if value == "-" {
		var err error
		b, err = io.ReadAll(io.LimitReader(e.stdin, api.MaxBodyBytes+1))
		if err != nil {
			return nil, fmt.Errorf("reading %s from stdin: %w", what, err)
		}
		if len(b) > api.MaxBodyBytes {
			return nil, usageError("%s on stdin is larger than %d bytes", what, api.MaxBodyBytes)
		}
	}
	b = bytes.TrimSpace(b)
	if !json.Valid(b) {
		var v any
		err := json.Unmarshal(b, &v)
		return nil, usageError("%s is not valid JSON: %v (quote it for the shell, e.g. '{\"key\":\"value\"}')", what, err)
	}
	if object && b[0] != '{' {
		return nil, usageError("%s must be a JSON object, e.g. '{\"variables\":{\"n\":1}}'", what)
	}
	return b, nil
}

// parseIfMatch turns --if-match N into an If-Match value: a version number
// becomes its ETag ("3"), `*` stays, and an ETag copied as it is shown ("3")
// is accepted too. Anything else is a usage error, never sent.
func parseIfMatch(cmd *cobra.Command, id, v string) (string, error) {
	if !cmd.Flags().Changed("if-match") {
		return "", usageError("--if-match is required: the version the change is based on (flowd get %s shows it), or '*' for any version", shellQuote(id))
	}
	v = strings.TrimSpace(v)
	if v == "*" {
		return v, nil
	}
	digits := strings.TrimSuffix(strings.TrimPrefix(v, `"`), `"`)
	quoted := len(digits) == len(v)-2
	if digits != "" && (quoted || digits == v) && strings.Trim(digits, "0123456789") == "" {
		if n, err := strconv.ParseInt(digits, 10, 64); err == nil {
			return api.ETag(n), nil
		}
	}
	return "", usageError(`--if-match must be the version the change is based on (a number such as 3, as "flowd get" shows it) or * for any version; got %q`, v)
}

// summary is the one line a write prints in text mode, ending with what the
// next --if-match needs.
func summary(e *env, inst *workflow.Instance, what string) error {
	_, err := fmt.Fprintf(e.stdout, "workflow %s %s: %s, version %d\n", inst.ID, what, inst.Status, inst.Version)
	return err
}

func newStartCmd(e *env) *cobra.Command {
	var o clientOptions
	var id, input, state, key string
	var priority int
	var freeForm bool
	var search []string
	cmd := &cobra.Command{
		Use:   "start DEFINITION | start --free-form",
		Short: "Start a workflow instance",
		Long: `start creates a workflow instance from DEFINITION and prints it. A DEFINITION
the server does not have is an error (exit 4): flowd def list shows those it
has, flowd def apply stores one.

--free-form instead creates an instance without a definition: no step ever
runs for it; it starts PENDING and changes only through the API (patch,
complete, the actions); --state gives its initial state.

--id chooses the instance id (1–128 characters of A-Za-z0-9._:-); without it
the server makes one. Starting an id that exists fails (exit 1).
--input and --state take JSON; "-" reads it from stdin.
--idempotency-key K makes the start safe to run again (after a timeout, from a
retrying script): a repeat with the same K and the same arguments within 24
hours prints the instance the first one created instead of creating another;
the same K with other arguments fails (exit 1).
--priority N (1–5) overrides the definition's priority: the tasks of
instances of higher priority are delivered first.
--search NAME=VALUE (repeatable) sets a search attribute, over the
definition's of that name: VALUE is a number, true/false or a JSON string
("007") as written, any other text a string. flowd list --where NAME=VALUE
finds the instance.
` + clientHelp,
		Example: `  # start the "order" workflow
  flowd start order --input '{"sku":"A-1","qty":2}'

  # a free-form instance with a chosen id, a variable and a step to complete later
  flowd start --free-form --id invoice-42 --state '{"variables":{"total":120},"steps":{"approve":{"status":"WAITING"}}}'

  # the input from a file
  flowd start order --id order-1 --input - < order.json

  # at most one instance per order, however often this runs
  flowd start order --input '{"sku":"A-1"}' --idempotency-key order-A-1-2026-11-25

  # searchable by customer and amount (flowd list --where customer=acme)
  flowd start order --input '{"sku":"A-1"}' --search customer=acme --search amount=120`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) > 1:
				return usageError("start takes at most one argument, the DEFINITION; got %d (see flowd start --help)", len(args))
			case len(args) == 1 && freeForm:
				return usageError("give a DEFINITION or --free-form, not both: --free-form creates an instance without a definition")
			case len(args) == 0 && !freeForm:
				// A free-form instance never runs: starting one by
				// forgetting the definition's name would look like a
				// workflow that hangs.
				return usageError("start needs the DEFINITION to start (flowd def list shows them); " +
					"--free-form creates an instance without one, which no step runs for: it changes only through patch, complete and the actions")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			req := api.CreateWorkflowRequest{ID: id}
			if len(args) == 1 {
				req.Definition = args[0]
			}
			if id != "" {
				if err := workflow.ValidateInstanceID(id); err != nil {
					return usageError("--id: %v", err)
				}
			}
			if key != "" {
				if err := store.ValidateIdempotencyKey(key); err != nil {
					return usageError("--idempotency-key: %v", err)
				}
			}
			if input == "-" && state == "-" {
				return usageError("only one of --input and --state can read stdin")
			}
			if cmd.Flags().Changed("priority") {
				if msg := workflow.PriorityProblem(priority); msg != "" {
					return usageError("--priority: %s", msg)
				}
				req.Priority = &priority
			}
			var err error
			if req.Search, err = searchFlags(search); err != nil {
				return err
			}
			if input != "" {
				if req.Input, err = readJSONArg(e, "--input", input, false); err != nil {
					return err
				}
			}
			if state != "" {
				if req.State, err = readJSONArg(e, "--state", state, true); err != nil {
					return err
				}
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			created := true
			opts := []client.CreateOption{client.WithCreated(&created)}
			if key != "" {
				opts = append(opts, client.WithIdempotencyKey(key))
			}
			inst, err := c.CreateWorkflow(cmd.Context(), req, opts...)
			if client.StatusCode(err) == http.StatusNotFound {
				// The only thing a start can miss is its definition.
				return &exitCodeError{code: exitNotFound, err: fmt.Errorf(
					"no definition %q on the server at %s: flowd def list shows the definitions it has, flowd def apply FILE stores one",
					req.Definition, o.server)}
			}
			if err != nil {
				return o.apiFailure(err)
			}
			if o.json() {
				return printJSON(e.stdout, inst)
			}
			if !created {
				return summary(e, inst, "was already created with this idempotency key")
			}
			return summary(e, inst, "created")
		},
	}
	cmd.Flags().StringVar(&id, "id", "", "instance id (default: generated by the server)")
	cmd.Flags().StringVar(&input, "input", "", "workflow input as JSON, or - for stdin")
	cmd.Flags().StringVar(&state, "state", "", "initial state as a JSON object, or - for stdin")
	cmd.Flags().StringVar(&key, "idempotency-key", "", "send this Idempotency-Key: a repeat within 24 hours returns the first instance")
	cmd.Flags().IntVar(&priority, "priority", 0, "priority 1–5, higher delivered first (default: the definition's)")
	cmd.Flags().BoolVar(&freeForm, "free-form", false, "create an instance without a definition, which changes only through the API")
	cmd.Flags().StringArrayVar(&search, "search", nil, "search attribute NAME=VALUE (repeatable), over the definition's")
	o.bind(cmd, e)
	return cmd
}

func newGetCmd(e *env) *cobra.Command {
	var o clientOptions
	cmd := &cobra.Command{
		Use:   "get ID",
		Short: "Show a workflow instance",
		Long: `get shows one workflow instance: its status, version, times, input, variables
and steps. Long values are shortened; -o json prints the instance exactly as the
API returns it. The version is what --if-match of patch and complete expects.

Steps are listed in the order of their definition's graph (each after the steps
it depends on), a code workflow's steps in the order they were recorded. A
foreach step shows its items' progress ("2/5 items done, 2 running"). The error
a Serverless Workflow instance failed with is shown whole, a field a line.
A re-run (flowd rerun) shows the workflow it re-runs ("re-run of"), and a
workflow that was re-run its newest re-runs ("re-runs").
` + clientHelp,
		Example: `  flowd get order-1
  flowd get order-1 -o json | jq .state.variables`,
		Args: exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			inst, err := c.GetWorkflow(cmd.Context(), args[0])
			if err != nil {
				return o.apiFailure(err)
			}
			if o.json() {
				return printJSON(e.stdout, inst)
			}
			return printInstanceSteps(e.stdout, inst, definitionGraph(cmd.Context(), c, inst))
		},
	}
	o.bind(cmd, e)
	return cmd
}

func newListCmd(e *env) *cobra.Command {
	var o clientOptions
	var status, definition, cursor, idPrefix, parent string
	var limit int
	var filters listFilters
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List workflow instances, newest first",
		Long: `list prints one page of workflow instances, newest first, as a table. When
there are more, it says on stderr how to get the next page (--cursor).
` + clientHelp,
		Example: `  flowd list
  flowd list --status failed
  flowd list --definition order --limit 20
  flowd list --id-prefix order-2026
  flowd list --parent 01J9ZQ3V5W6X7Y8Z9A0B1C2D3E
  flowd list --where customer=acme --where region=eu --since 1h
  flowd list -o json | jq -r '.workflows[].id'`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts := client.ListOptions{Definition: definition, Limit: limit, Cursor: cursor, IDPrefix: idPrefix, Parent: parent}
			if cmd.Flags().Changed("parent") {
				if err := workflow.ValidateInstanceID(parent); err != nil {
					return usageError("--parent: %v", err)
				}
			}
			if cmd.Flags().Changed("id-prefix") {
				if err := workflow.ValidateIDPrefix(idPrefix); err != nil {
					return usageError("--id-prefix: %v", err)
				}
			}
			if err := filters.apply(&opts, e.clock()); err != nil {
				return err
			}
			if status != "" {
				st, err := workflow.ParseStatus(strings.ToUpper(status))
				if err != nil {
					return usageError("--status: %v", err)
				}
				opts.Status = st
			}
			if cmd.Flags().Changed("limit") && (limit < 1 || limit > store.MaxListLimit) {
				return usageError("--limit must be from 1 to %d, not %d", store.MaxListLimit, limit)
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			page, err := c.ListWorkflows(cmd.Context(), opts)
			if err != nil {
				return o.apiFailure(err)
			}
			if o.json() {
				return printJSON(e.stdout, page)
			}
			if len(page.Workflows) == 0 {
				fmt.Fprintln(e.stderr, "no workflows found")
				return nil
			}
			if err := printList(e.stdout, page.Workflows); err != nil {
				return err
			}
			if page.NextCursor != "" {
				next := []string{"flowd", "list"}
				if opts.Status != "" {
					next = append(next, "--status", string(opts.Status))
				}
				if definition != "" {
					next = append(next, "--definition", shellQuote(definition))
				}
				if idPrefix != "" {
					next = append(next, "--id-prefix", shellQuote(idPrefix))
				}
				if parent != "" {
					next = append(next, "--parent", shellQuote(parent))
				}
				next = append(next, filters.nextArgs()...)
				if limit != 0 {
					next = append(next, "--limit", strconv.Itoa(limit))
				}
				next = append(next, "--cursor", shellQuote(page.NextCursor))
				fmt.Fprintf(e.stderr, "more workflows: %s\n", strings.Join(next, " "))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&status, "status", "", "only instances with this status ("+statusNames()+")")
	cmd.Flags().StringVar(&definition, "definition", "", "only instances of this definition")
	cmd.Flags().IntVar(&limit, "limit", 0, fmt.Sprintf("page size, 1–%d (default %d)", store.MaxListLimit, store.DefaultListLimit))
	cmd.Flags().StringVar(&cursor, "cursor", "", "continue after the page that printed this cursor")
	cmd.Flags().StringVar(&idPrefix, "id-prefix", "", "only instances whose id starts with this")
	cmd.Flags().StringVar(&parent, "parent", "", "only the child workflows of this instance")
	filters.bind(cmd)
	o.bind(cmd, e)
	return cmd
}

func statusNames() string {
	names := make([]string, len(workflow.Statuses))
	for i, s := range workflow.Statuses {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

func newPatchCmd(e *env) *cobra.Command {
	var o clientOptions
	var ifMatch string
	cmd := &cobra.Command{
		Use:   "patch ID --if-match N JSON",
		Short: "Change a workflow's state with a JSON merge patch",
		Long: `patch applies JSON (a JSON Merge Patch, RFC 7396) to the state of workflow ID:
objects merge key by key, null removes a key, anything else replaces.

--if-match N is required: the patch applies only if the workflow is still at
version N (the version "flowd get" printed), so a change made meanwhile by
someone else is never overwritten. If it moved on, nothing is written and patch
exits with status 3: read it again and decide again. --if-match '*' applies the
patch to whatever the current version is.

JSON "-" reads the patch from stdin.
` + clientHelp,
		Example: `  # set a variable, if the workflow is still at version 3
  flowd patch order-1 --if-match 3 '{"variables":{"approved":true}}'

  # remove a variable, whatever the version
  flowd patch order-1 --if-match '*' '{"variables":{"draft":null}}'

  # the patch from stdin
  echo '{"variables":{"n":1}}' | flowd patch order-1 --if-match 3 -`,
		Args: exactArgs("ID", "JSON"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cond, err := parseIfMatch(cmd, args[0], ifMatch)
			if err != nil {
				return err
			}
			patch, err := readJSONArg(e, "the patch", args[1], true)
			if err != nil {
				return err
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			inst, err := c.PatchWorkflow(cmd.Context(), args[0], cond, patch)
			if err != nil {
				return o.apiFailure(err)
			}
			if o.json() {
				return printJSON(e.stdout, inst)
			}
			return summary(e, inst, "patched")
		},
	}
	cmd.Flags().StringVar(&ifMatch, "if-match", "", "required: apply only at this version (a number, or * for any)")
	o.bind(cmd, e)
	return cmd
}

func newCompleteCmd(e *env) *cobra.Command {
	o := clientOptions{formatFlag: "format"}
	var ifMatch, output string
	cmd := &cobra.Command{
		Use:   "complete ID STEP --if-match N [--output JSON]",
		Short: "Complete a step of a workflow from outside",
		Long: `complete marks step STEP of workflow ID as COMPLETED with the JSON --output
(default null), e.g. to answer a "wait" step. It does not change the workflow's
status by itself; for a workflow started from a definition the engine moves on.

--if-match N is required, as for patch: the step is completed only if the
workflow is still at version N (exit status 3 otherwise), or at any version with
'*'. A step that is already completed is an error (exit 1), never overwritten.

Here --output is the step's output; the output format is -o/--format.
--output - reads it from stdin.
` + clientHelp,
		Example: `  flowd complete order-1 approve --if-match 4 --output '{"approved_by":"ana"}'
  flowd complete order-1 approve --if-match '*' -o json`,
		Args: exactArgs("ID", "STEP"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cond, err := parseIfMatch(cmd, args[0], ifMatch)
			if err != nil {
				return err
			}
			var out json.RawMessage
			if cmd.Flags().Changed("output") {
				if out, err = readJSONArg(e, "--output (the step's output; the output format is -o)", output, false); err != nil {
					return err
				}
			}
			if err := workflow.ValidateStepID(args[1]); err != nil {
				return usageError("STEP: %v", err)
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			inst, err := c.CompleteStep(cmd.Context(), args[0], args[1], cond, out)
			if err != nil {
				return o.apiFailure(err)
			}
			if o.json() {
				return printJSON(e.stdout, inst)
			}
			return summary(e, inst, "step "+args[1]+" completed")
		},
	}
	cmd.Flags().StringVar(&ifMatch, "if-match", "", "required: complete only at this version (a number, or * for any)")
	cmd.Flags().StringVar(&output, "output", "", "the step's output as JSON, or - for stdin (default null)")
	o.bind(cmd, e)
	return cmd
}

// actionCmd describes one convenience transition.
type actionCmd struct {
	name, done, short, long string
}

var actionCmds = []actionCmd{
	{"cancel", "cancelled", "Cancel a workflow",
		"cancel moves workflow ID to CANCELLED from PENDING, QUEUED, RUNNING or PAUSED. CANCELLED\nis terminal: nothing changes the workflow afterwards."},
	{"pause", "paused", "Pause a running workflow",
		"pause moves workflow ID from RUNNING to PAUSED: queued steps are not started\nand nothing new is scheduled until resume."},
	{"resume", "resumed", "Resume a paused workflow",
		"resume moves workflow ID from PAUSED back to RUNNING."},
	{"retry", "retried", "Retry a failed or timed-out workflow",
		"retry moves workflow ID from FAILED or TIMED_OUT back to RUNNING; its failed\nsteps run again with a fresh attempt budget."},
}

func newActionCmd(e *env, a actionCmd) *cobra.Command {
	var o clientOptions
	cmd := &cobra.Command{
		Use:   a.name + " ID",
		Short: a.short,
		Long: a.long + `
From any other status it fails (exit 1) and changes nothing.
` + clientHelp,
		Example: "  flowd " + a.name + " order-1",
		Args:    exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			inst, err := c.Action(cmd.Context(), args[0], a.name)
			if err != nil {
				return o.apiFailure(err)
			}
			if o.json() {
				return printJSON(e.stdout, inst)
			}
			return summary(e, inst, a.done)
		},
	}
	o.bind(cmd, e)
	return cmd
}

func newHistoryCmd(e *env) *cobra.Command {
	var o clientOptions
	cmd := &cobra.Command{
		Use:   "history ID",
		Short: "Show every version of a workflow",
		Long: `history lists every version of workflow ID, oldest first: its status, when it
was written, who wrote it (the actor: the name of the token of the request,
"engine" for the engine's own writes, "anonymous" without tokens), what caused
it, and what changed since the version before:
"+name=value" added, "-name" removed, "name: old → new" changed, where name
is a variable, "step ID" or "state.KEY" (another top-level key of the state);
a step whose status stayed shows its attempts and its items done (foreach).
The error a version recorded for a step ends its line, whole; the cause of a
write about one item of a foreach step names its index ("iteration 2").
Times are to the millisecond. -o json prints each version's full state;
"flowd diff ID V1 V2" shows everything that changed between two versions.
` + clientHelp,
		Example: `  flowd history order-1
  flowd history order-1 -o json | jq '.versions[-1].state'`,
		Args: exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			versions, err := c.History(cmd.Context(), args[0])
			if err != nil {
				return o.apiFailure(err)
			}
			if o.json() {
				return printJSON(e.stdout, api.HistoryResponse{Versions: versions})
			}
			return printHistory(e.stdout, versions)
		},
	}
	o.bind(cmd, e)
	return cmd
}
