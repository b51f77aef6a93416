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
the data as its output before the command returns; the ids of their
workflows are printed. A step whose workflow's state would pass the server's
--max-state-bytes with the data fails instead: each is printed with its error. The server keeps the event: a wait step that starts
waiting later (within the server's --event-retention) still takes it, if its
workflow was created before the event was published.

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
			if _, err := fmt.Fprintf(e.stdout, "event %s published\n", res.ID); err != nil {
				return err
			}
			if len(res.Delivered) == 0 && len(res.Failed) == 0 {
				_, err = fmt.Fprintln(e.stdout, "no step was waiting for it")
				return err
			}
			if len(res.Delivered) > 0 {
				if _, err := fmt.Fprintf(e.stdout, "completed %d waiting %s, in workflows: %s\n", len(res.Delivered), plural(len(res.Delivered), "step", "steps"), strings.Join(res.Delivered, ", ")); err != nil {
					return err
				}
			}
			return printEventFailures(e.stdout, res.Failed)
		},
	}
	cmd.Flags().StringVar(&key, "key", "", "the event's key (default \"\")")
	cmd.Flags().StringVar(&data, "data", "", "the event's data as JSON, or - for stdin (default null)")
	o.bind(cmd, e)
	return cmd
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
