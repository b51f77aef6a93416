package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/client"
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
	var yes bool
	cmd := &cobra.Command{
		Use:   "delete ID [--if-match N | --yes]",
		Short: "Delete a finished workflow with its history and child workflows",
		Long: `delete deletes workflow ID with its history and tasks, and its child
workflows (theirs too) with theirs. Only a finished workflow (COMPLETED,
FAILED, CANCELLED or TIMED_OUT) can be deleted; a PENDING, QUEUED, RUNNING or
PAUSED one, or one with a child that has not finished, is refused (exit 1):
cancel it first.

The workflow is deleted only at the version the delete is based on, so a
workflow retried meanwhile is never lost: if it moved on, nothing is deleted
and delete exits with status 3. That version is:
  --if-match N   version N, as for patch (the version "flowd get" printed);
                 '*' deletes whatever the current version is;
  otherwise      the version delete reads first: on a terminal it shows the
                 workflow's status and version and asks before deleting;
                 --yes deletes without asking. Without a terminal (a script,
                 a pipe) one of --if-match and --yes is required (exit 2).
` + clientHelp,
		Example: `  flowd delete order-1              # asks: delete workflow order-1 (COMPLETED, version 4)...? [y/N]
  flowd delete order-1 --yes        # in a script: at the version it reads
  flowd delete order-1 --if-match 4
  flowd delete order-1 --if-match '*'`,
		Args: exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			var cond string
			if cmd.Flags().Changed("if-match") {
				var err error
				if cond, err = parseIfMatch(cmd, id, ifMatch); err != nil {
					return err
				}
			} else if !yes && !e.interactive() {
				return usageError("--if-match N or --yes is required without a terminal to confirm on: "+
					"--if-match deletes only at version N (flowd get %s shows it), --yes at the version delete reads", shellQuote(id))
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			if cond == "" {
				if cond, err = confirmDelete(cmd, e, &o, c, id, yes); err != nil {
					return err
				}
			}
			if err := c.DeleteWorkflow(cmd.Context(), id, cond); err != nil {
				return o.apiFailure(err)
			}
			if o.json() {
				return printJSON(e.stdout, deleted{ID: args[0], Deleted: true})
			}
			_, err = fmt.Fprintf(e.stdout, "workflow %s deleted\n", clean(args[0]))
			return err
		},
	}
	cmd.Flags().StringVar(&ifMatch, "if-match", "", "delete only at this version (a number, or * for any)")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "delete at the version read now, without asking")
	o.bind(cmd, e)
	return cmd
}

// confirmDelete reads workflow id and returns the If-Match of the version
// it read, once the user said yes to deleting it (or gave --yes). A
// workflow that is not finished is not asked about: the delete is sent and
// the server's refusal says why.
func confirmDelete(cmd *cobra.Command, e *env, o *clientOptions, c *client.Client, id string, yes bool) (string, error) {
	inst, err := c.GetWorkflow(cmd.Context(), id)
	if err != nil {
		return "", o.apiFailure(err)
	}
	cond := api.ETag(inst.Version)
	// StopsSteps is the server's test of a deletable workflow.
	if yes || !inst.Status.StopsSteps() {
		return cond, nil
	}
	fmt.Fprintf(e.stderr, "delete workflow %s (%s, version %d) with its history and child workflows? [y/N] ", clean(id), inst.Status, inst.Version)
	answer, err := bufio.NewReader(e.stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("reading the answer: %w", err)
	}
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return cond, nil
	}
	return "", fmt.Errorf("workflow %s not deleted", clean(id))
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
