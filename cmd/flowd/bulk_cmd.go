package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/client"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// bulkPoll is how often `flowd bulk` reads the operation's progress.
const bulkPoll = 500 * time.Millisecond

// bulkOptions are the flags of `flowd bulk`.
type bulkOptions struct {
	clientOptions
	where      []string
	status     string
	definition string
	idPrefix   string
	parent     string
	since      time.Duration
	limit      int
	noWait     bool
}

// filterGiven reports whether any filter flag was given.
func (o *bulkOptions) filterGiven(cmd *cobra.Command) bool {
	for _, name := range []string{"where", "status", "definition", "id-prefix", "parent", "since", "limit", "no-wait"} {
		if cmd.Flags().Changed(name) {
			return true
		}
	}
	return false
}

func newBulkCmd(e *env) *cobra.Command {
	var o bulkOptions
	cmd := &cobra.Command{
		Use:   "bulk ACTION [--where NAME=VALUE]... [--status S] [--definition D] [--id-prefix P] [--parent ID] [--since D] [--limit N] [--no-wait]\n  flowd bulk get ID\n  flowd bulk cancel ID",
		Short: "Cancel, pause, resume, retry or delete every workflow a filter matches",
		Long: `bulk applies ACTION (cancel, pause, resume, retry or delete) to every workflow
the filter matches, as a durable operation the server's nodes work off in
batches (it survives restarts; see docs/bulk.md). At least
one filter flag is required:

  --where NAME=VALUE   a search attribute (repeatable; ANDed)
  --status S           the workflow's status
  --definition D       the workflow's definition
  --id-prefix P        the start of its id
  --parent ID          a child workflow of ID
  --since D            created within D (1h, 30m) of now

Only workflows created before the operation are touched; one that changed
meanwhile is read again and skipped when it no longer matches. --limit N
acts on at most N.

It waits until the operation ends, with a progress bar on a terminal (a
line per change otherwise), and exits 0 when it is DONE with no failure, 1
otherwise. --no-wait prints the operation's id and returns; Ctrl-C stops
waiting, not the operation.

  flowd bulk get ID      shows an operation and its progress
  flowd bulk cancel ID   stops it after the batch in flight (a bulk cancel
                         of workflows is "flowd bulk cancel" with a filter)
` + clientHelp,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError("bulk needs an ACTION (%s), or get ID, or cancel ID", strings.Join(store.BulkActions, ", "))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			switch {
			case args[0] == "get" || (args[0] == "cancel" && len(args) == 2):
				if len(args) != 2 || o.filterGiven(cmd) {
					return usageError("usage: flowd bulk %s ID (no filter flags)", args[0])
				}
				var op *api.BulkOperation
				if args[0] == "get" {
					op, err = c.GetBulk(cmd.Context(), args[1])
				} else {
					op, err = c.CancelBulk(cmd.Context(), args[1])
				}
				if err != nil {
					return o.apiFailure(err)
				}
				if o.json() {
					return printJSON(e.stdout, op)
				}
				return printBulk(e.stdout, op)
			case !slices.Contains(store.BulkActions, args[0]):
				return usageError("unknown bulk action %q: one of %s (or get ID, cancel ID)", args[0], strings.Join(store.BulkActions, ", "))
			case len(args) != 1:
				return usageError("bulk %s takes no argument besides the action: the workflows are chosen by the filter flags", args[0])
			}
			req, err := o.request(e, args[0])
			if err != nil {
				return err
			}
			return o.runBulk(cmd, e, c, req)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.where, "where", nil, "NAME=VALUE: a search attribute the workflows have (repeatable)")
	f.StringVar(&o.status, "status", "", "only workflows in this status")
	f.StringVar(&o.definition, "definition", "", "only workflows of this definition")
	f.StringVar(&o.idPrefix, "id-prefix", "", "only workflows whose id starts with this")
	f.StringVar(&o.parent, "parent", "", "only the child workflows of this workflow")
	f.DurationVar(&o.since, "since", 0, "only workflows created within this long of now (e.g. 1h)")
	f.IntVar(&o.limit, "limit", 0, "act on at most this many workflows")
	f.BoolVar(&o.noWait, "no-wait", false, "print the operation's id and return without waiting")
	o.bind(cmd, e)
	return cmd
}

// request is the body of POST /v1/bulk the flags ask for.
func (o *bulkOptions) request(e *env, action string) (api.BulkRequest, error) {
	req := api.BulkRequest{Action: action, Filter: api.BulkFilter{Definition: o.definition, IDPrefix: o.idPrefix, Parent: o.parent}}
	if o.status != "" {
		st, err := workflow.ParseStatus(strings.ToUpper(o.status))
		if err != nil {
			return req, usageError("--status: %v", err)
		}
		req.Filter.Status = string(st)
	}
	for _, w := range o.where {
		name, value, ok := strings.Cut(w, "=")
		if !ok || name == "" {
			return req, usageError("--where %q: want NAME=VALUE", w)
		}
		if req.Filter.Search == nil {
			req.Filter.Search = map[string]json.RawMessage{}
		}
		if _, dup := req.Filter.Search[name]; dup {
			return req, usageError("--where names %q twice", name)
		}
		b, _ := json.Marshal(value)
		req.Filter.Search[name] = b
	}
	if o.since < 0 {
		return req, usageError("--since must be positive, not %s", o.since)
	}
	if o.since > 0 {
		req.Filter.CreatedAfter = e.clock().Add(-o.since).UTC().Format(time.RFC3339Nano)
	}
	if o.limit < 0 {
		return req, usageError("--limit must be positive, not %d", o.limit)
	}
	if o.limit > 0 {
		n := o.limit
		req.Limit = &n
	}
	if req.Filter.Status == "" && req.Filter.Definition == "" && req.Filter.IDPrefix == "" && req.Filter.Parent == "" &&
		len(req.Filter.Search) == 0 && req.Filter.CreatedAfter == "" {
		return req, usageError("bulk %s needs a filter: --where, --status, --definition, --id-prefix, --parent or --since (it would act on every workflow)", action)
	}
	return req, nil
}

// runBulk creates the operation and, unless --no-wait, follows it to its
// end.
func (o *bulkOptions) runBulk(cmd *cobra.Command, e *env, c *client.Client, req api.BulkRequest) error {
	ctx := cmd.Context()
	total := -1
	if !o.noWait {
		// The count before acting gives the bar its length; the operation
		// may find fewer (a limit, instances that change).
		if n, err := c.CountBulk(ctx, req.Filter); err == nil && n.Exact {
			total = n.Count
			if req.Limit != nil && *req.Limit < total {
				total = *req.Limit
			}
		}
	}
	op, err := c.CreateBulk(ctx, req)
	if err != nil {
		return o.apiFailure(err)
	}
	if o.noWait {
		if o.json() {
			return printJSON(e.stdout, op)
		}
		fmt.Fprintln(e.stdout, op.ID)
		return nil
	}
	p := newBulkProgress(e.stdout, total, !o.json())
	for op.Status == store.BulkRunning {
		p.show(op)
		select {
		case <-ctx.Done():
			p.end()
			return fmt.Errorf("stopped waiting; bulk operation %s goes on (flowd bulk get %s, flowd bulk cancel %s)", op.ID, op.ID, op.ID)
		case <-time.After(bulkPoll):
		}
		next, err := c.GetBulk(ctx, op.ID)
		if err != nil {
			p.end()
			return o.apiFailure(err)
		}
		op = next
	}
	p.show(op)
	p.end()
	if o.json() {
		if err := printJSON(e.stdout, op); err != nil {
			return err
		}
	} else if err := printBulk(e.stdout, op); err != nil {
		return err
	}
	switch {
	case op.Status != store.BulkDone:
		return fmt.Errorf("bulk operation %s was %s", op.ID, op.Status)
	case op.Failed > 0:
		return fmt.Errorf("bulk operation %s failed on %d workflows", op.ID, op.Failed)
	}
	return nil
}

// bulkProgress shows an operation's progress: a bar redrawn in place on a
// terminal, a line per change otherwise, nothing with -o json.
type bulkProgress struct {
	w        io.Writer
	total    int // -1: unknown
	on, tty  bool
	last     string
	drawnBar bool
}

func newBulkProgress(w io.Writer, total int, on bool) *bulkProgress {
	f, ok := w.(*os.File)
	return &bulkProgress{w: w, total: total, on: on, tty: ok && term.IsTerminal(int(f.Fd()))}
}

func (p *bulkProgress) show(op *api.BulkOperation) {
	if !p.on {
		return
	}
	counts := fmt.Sprintf("%d matched: %d done, %d skipped, %d failed", op.Matched, op.Done, op.Skipped, op.Failed)
	if !p.tty {
		line := fmt.Sprintf("%s %s %s", op.ID, op.Status, counts)
		if line != p.last {
			fmt.Fprintln(p.w, line)
			p.last = line
		}
		return
	}
	const width = 30
	bar := strings.Repeat("░", width)
	if p.total > 0 {
		filled := min(width, op.Matched*width/p.total)
		bar = strings.Repeat("█", filled) + strings.Repeat("░", width-filled)
		counts = fmt.Sprintf("%d/%d (%d%%) %s", op.Matched, p.total, min(100, op.Matched*100/p.total), counts[strings.Index(counts, ":")+2:])
	}
	fmt.Fprintf(p.w, "\r%s %s %s\033[K", bar, op.Status, counts)
	p.drawnBar = true
}

// end ends the bar's line.
func (p *bulkProgress) end() {
	if p.drawnBar {
		fmt.Fprintln(p.w)
		p.drawnBar = false
	}
}

// printBulk prints an operation for people.
func printBulk(w io.Writer, op *api.BulkOperation) error {
	tw := newTable(w)
	fmt.Fprintf(tw, "id:\t%s\n", clean(op.ID))
	fmt.Fprintf(tw, "action:\t%s\n", clean(op.Action))
	fmt.Fprintf(tw, "filter:\t%s\n", clean(describeBulkFilter(op.Filter)))
	if op.Limit > 0 {
		fmt.Fprintf(tw, "limit:\t%d\n", op.Limit)
	}
	fmt.Fprintf(tw, "status:\t%s\n", clean(op.Status))
	fmt.Fprintf(tw, "matched:\t%d\n", op.Matched)
	fmt.Fprintf(tw, "done:\t%d\n", op.Done)
	fmt.Fprintf(tw, "skipped:\t%d\n", op.Skipped)
	fmt.Fprintf(tw, "failed:\t%d\n", op.Failed)
	for _, be := range op.Errors {
		fmt.Fprintf(tw, "error:\t%s: %s\n", clean(be.WorkflowID), clean(be.Error))
	}
	return tw.Flush()
}

// describeBulkFilter is the filter as flags would say it.
func describeBulkFilter(f api.BulkFilter) string {
	var parts []string
	for _, kv := range [][2]string{{"status", f.Status}, {"definition", f.Definition}, {"id_prefix", f.IDPrefix}, {"parent", f.Parent},
		{"created_after", f.CreatedAfter}, {"created_before", f.CreatedBefore}, {"updated_before", f.UpdatedBefore}} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+"="+kv[1])
		}
	}
	names := make([]string, 0, len(f.Search))
	for name := range f.Search {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		var v string
		if json.Unmarshal(f.Search[name], &v) != nil {
			v = string(f.Search[name])
		}
		parts = append(parts, "search."+name+"="+v)
	}
	return strings.Join(parts, " ")
}
