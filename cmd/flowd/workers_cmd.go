package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/flowd/flowd/api"
)

// liveWithin is how recent a worker's last poll must be for it to count as
// live: the dashboard warns about a step whose handler no worker polled for
// within the same time.
const liveWithin = 60 * time.Second

func newWorkersCmd(e *env) *cobra.Command {
	var o clientOptions
	cmd := &cobra.Command{
		Use:   "workers",
		Short: "List the workers polling for tasks",
		Long: `workers lists the remote workers and in-process pools of every node that
polled for tasks in the last 5 minutes, the most recent poll first: the worker's
name, the node that served its polls, the handlers it polls for, when it last
polled and whether it is live (it polled within the last 60 seconds, by this
machine's clock) or stale (it has not: it may have stopped, and the tasks of
its handlers wait for another worker). -o json prints the API's response.
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
			fmt.Fprintln(tw, "WORKER\tNODE\tHANDLERS\tLAST POLL\tIN FLIGHT\tSTATE")
			now, stale := e.clock(), 0
			for _, w := range ws {
				handlers := make([]string, len(w.Handlers))
				for i, h := range w.Handlers {
					handlers[i] = clean(h)
				}
				list := strings.Join(handlers, ",")
				if list == "" {
					list = "-"
				}
				state := "live"
				if age := now.Sub(w.LastPollAt); age > liveWithin {
					state = "stale (" + age.Truncate(time.Second).String() + " ago)"
					stale++
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", clean(w.Worker), clean(w.Node), list, timestamp(w.LastPollAt), w.InFlight, state)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if stale > 0 {
				fmt.Fprintf(e.stderr, "%d %s last polled more than %.0fs ago: stopped, or cut off from the server; the tasks of %s wait for another worker\n",
					stale, plural(stale, "worker", "workers"), liveWithin.Seconds(), plural(stale, "its handlers", "their handlers"))
			}
			return nil
		},
	}
	o.bind(cmd, e)
	return cmd
}
