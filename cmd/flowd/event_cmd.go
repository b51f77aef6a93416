package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/workflow"
)

// newEventCmd is `flowd event NAME [--key K] [--data JSON]`: POST /v1/events.
func newEventCmd(e *env) *cobra.Command {
	var o clientOptions
	var key, data string
	cmd := &cobra.Command{
		Use:   "event NAME [--key K] [--data JSON]",
		Short: "Publish an event to the wait steps waiting for it",
		Long: `event publishes event NAME with --key K (default "") and the JSON --data
(default null). Every wait step waiting for that name and key completes with
the data as its output before the command returns; how many took it and the
ids of their workflows are printed. A step whose workflow's state would pass
the server's --max-state-bytes with the data fails instead: each is printed
with its error. The server keeps the event for its --event-retention, and
prints until when: a wait step that starts waiting later still takes it, if
its workflow was created before the event was published.

NAME is 1–128 characters of [A-Za-z0-9._:-]; K at most 256 characters.
--data - reads the data from stdin.
` + clientHelp,
		Example: `  flowd event payment --key order-17 --data '{"amount":42}'
  flowd event nightly-close -o json`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if msg := workflow.EventNameProblem(name); msg != "" {
				return usageError("NAME %s", msg)
			}
			if n := utf8.RuneCountInString(key); n > workflow.MaxEventKeyLength {
				return usageError("--key has %d characters, more than %d", n, workflow.MaxEventKeyLength)
			}
			var payload json.RawMessage
			if cmd.Flags().Changed("data") {
				var err error
				if payload, err = readJSONArg(e, "--data", data, false); err != nil {
					return err
				}
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			res, err := c.PublishEvent(cmd.Context(), name, key, payload)
			if err != nil {
				return o.apiFailure(err)
			}
			if o.json() {
				return printJSON(e.stdout, res)
			}
			return printPublished(e.stdout, res)
		},
	}
	cmd.Flags().StringVar(&key, "key", "", "the event's key (default \"\")")
	cmd.Flags().StringVar(&data, "data", "", "the event's data as JSON, or - for stdin (default null)")
	o.bind(cmd, e)
	return cmd
}

// printPublished says what a publish did: how many waiting steps took the
// event now, the steps it failed instead, and until when the server keeps
// it for the steps that start waiting later — an event nobody waited for
// yet is not lost.
func printPublished(w io.Writer, res *api.PublishEventResponse) error {
	if _, err := fmt.Fprintf(w, "event %s published\n", clean(res.ID)); err != nil {
		return err
	}
	n := len(res.Delivered)
	took := fmt.Sprintf("%d waiting %s took it", n, plural(n, "step", "steps"))
	if n > 0 {
		ids := make([]string, n)
		for i, id := range res.Delivered {
			ids[i] = clean(id)
		}
		took += ", in workflows: " + strings.Join(ids, ", ")
	}
	if _, err := fmt.Fprintln(w, took); err != nil {
		return err
	}
	if err := printEventFailures(w, res.Failed); err != nil {
		return err
	}
	until := "for the server's --event-retention"
	if !res.ExpiresAt.IsZero() {
		until = "until " + timestamp(res.ExpiresAt) + " (the server's --event-retention)"
	}
	_, err := fmt.Fprintf(w, "kept %s: a wait step for it that starts waiting later, in a workflow started before now, takes it then\n", until)
	return err
}

// printEventFailures lists the waiting steps an event failed instead of
// completing, one a line with the error each failed with.
func printEventFailures(w io.Writer, failed []api.EventFailure) error {
	if len(failed) == 0 {
		return nil
	}
	if _, err := fmt.Fprintf(w, "could not deliver it to %d waiting %s, which failed:\n", len(failed), plural(len(failed), "step", "steps")); err != nil {
		return err
	}
	for _, f := range failed {
		if _, err := fmt.Fprintf(w, "  workflow %s step %s: %s\n", f.WorkflowID, f.Step, f.Error); err != nil {
			return err
		}
	}
	return nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
