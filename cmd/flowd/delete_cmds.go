package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// deleted is what delete and def delete print with -o json: the API's
// answer (204) has no body.
type deleted struct {
	ID      string `json:"id,omitempty"`
	Name    string `json:"name,omitempty"`
	Deleted bool   `json:"deleted"`
}

func newDeleteCmd(e *env) *cobra.Command {
	var o clientOptions
	var ifMatch string
	cmd := &cobra.Command{
		Use:   "delete ID --if-match N",
		Short: "Delete a finished workflow with its history",
		Long: `delete deletes workflow ID with its history and tasks. Only a finished
workflow (COMPLETED, FAILED, CANCELLED or TIMED_OUT) can be deleted; a
PENDING, QUEUED, RUNNING or PAUSED one is refused (exit 1): cancel it first.

--if-match N is required, as for patch: the workflow is deleted only if it is
still at version N (the version "flowd get" printed), so a workflow retried
meanwhile is never lost. If it moved on, nothing is deleted and delete exits
with status 3. --if-match '*' deletes whatever the current version is.
` + clientHelp,
		Example: `  flowd delete order-1 --if-match 4
  flowd delete order-1 --if-match '*'`,
		Args: exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cond, err := parseIfMatch(cmd, args[0], ifMatch)
			if err != nil {
				return err
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			if err := c.DeleteWorkflow(cmd.Context(), args[0], cond); err != nil {
				return o.apiFailure(err)
			}
			if o.json() {
				return printJSON(e.stdout, deleted{ID: args[0], Deleted: true})
			}
			_, err = fmt.Fprintf(e.stdout, "workflow %s deleted\n", clean(args[0]))
			return err
		},
	}
	cmd.Flags().StringVar(&ifMatch, "if-match", "", "required: delete only at this version (a number, or * for any)")
	o.bind(cmd, e)
	return cmd
}

func newDefDeleteCmd(e *env) *cobra.Command {
	var o clientOptions
	cmd := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a definition (every revision)",
		Long: `delete deletes every revision of definition NAME. It is refused (exit 1)
while a workflow of the definition is PENDING, QUEUED, RUNNING or PAUSED. Finished
workflows of it stay readable. Applying NAME again later continues its
revision numbers: a revision number is never used twice.
` + clientHelp,
		Example: `  flowd def delete order`,
		Args:    exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			if err := c.DeleteDefinition(cmd.Context(), args[0]); err != nil {
				return o.apiFailure(err)
			}
			if o.json() {
				return printJSON(e.stdout, deleted{Name: args[0], Deleted: true})
			}
			_, err = fmt.Fprintf(e.stdout, "definition %s deleted (every revision)\n", clean(args[0]))
			return err
		},
	}
	o.bind(cmd, e)
	return cmd
}
