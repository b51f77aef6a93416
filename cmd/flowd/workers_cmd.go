package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/flowd/flowd/api"
)

func newWorkersCmd(e *env) *cobra.Command {
	var o clientOptions
	cmd := &cobra.Command{
		Use:   "workers",
		Short: "List the workers polling for tasks",
		Long: `workers lists the remote workers and in-process pools of every node that
polled for tasks in the last 5 minutes, the most recent poll first: the worker's
name, the node that served its polls, the handlers it polls for and when it last
polled. -o json prints the API's response.
` + clientHelp,
		Example: `  flowd workers
  flowd workers -o json | jq -r '.workers[].handlers[]' | sort -u`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			ws, err := c.ListWorkers(cmd.Context())
			if err != nil {
				return o.apiFailure(err)
			}
			if o.json() {
				return printJSON(e.stdout, api.ListWorkersResponse{Workers: ws})
			}
			if len(ws) == 0 {
				fmt.Fprintln(e.stderr, "no worker polled in the last 5 minutes")
				return nil
			}
			tw := newTable(e.stdout)
			fmt.Fprintln(tw, "WORKER\tNODE\tHANDLERS\tLAST POLL")
			for _, w := range ws {
				handlers := make([]string, len(w.Handlers))
				for i, h := range w.Handlers {
					handlers[i] = clean(h)
				}
				list := strings.Join(handlers, ",")
				if list == "" {
					list = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", clean(w.Worker), clean(w.Node), list, timestamp(w.LastPollAt))
			}
			return tw.Flush()
		},
	}
	o.bind(cmd, e)
	return cmd
}
