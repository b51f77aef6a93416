package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/client"
	"github.com/flowd/flowd/examples"
	"github.com/flowd/flowd/workflow"
)

// clientTarget seeds the demo through a server's API.
type clientTarget struct{ c *client.Client }

func (t clientTarget) PutDefinition(ctx context.Context, body []byte) error {
	def, err := workflow.ParseDefinition(body)
	if err != nil {
		return err
	}
	_, _, err = t.c.PutDefinition(ctx, def.Name, body)
	return err
}

func (t clientTarget) Start(ctx context.Context, def string, input json.RawMessage) (string, error) {
	inst, err := t.c.CreateWorkflow(ctx, api.CreateWorkflowRequest{Definition: def, Input: input})
	if err != nil {
		return "", err
	}
	return inst.ID, nil
}

func newDemoCmd(e *env) *cobra.Command {
	var o clientOptions
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Load the example workflows into a running server and start a few",
		Long: `demo applies the example definitions (an order flow with an approval, a
fan-out/fan-in and a retrying http call) to a running server and starts four
workflows. Their task steps use the demo handlers echo and sleep: run the server
with --demo-handlers, or a worker with flowd worker --handlers echo,sleep,fail.
The http call dials 127.0.0.1:9999, which the server refuses unless it runs with
--outbound-allow 127.0.0.1:9999. (flowd serve --demo does all of this by itself on
an empty database.)`,
		Example: `  flowd serve --demo-handlers &
  flowd demo
  open http://127.0.0.1:8080/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			ids, err := examples.Seed(cmd.Context(), clientTarget{c})
			if err != nil {
				return o.apiFailure(err)
			}
			if o.json() {
				return json.NewEncoder(e.stdout).Encode(map[string]any{"workflows": ids})
			}
			for _, f := range examples.Files() {
				fmt.Fprintf(e.stdout, "applied %s\n", f.Name)
			}
			for _, id := range ids {
				fmt.Fprintf(e.stdout, "started %s\n", id)
			}
			fmt.Fprintf(e.stdout, "open %s/ to watch them\n", o.server)
			return nil
		},
	}
	o.bind(cmd, e)
	return cmd
}
