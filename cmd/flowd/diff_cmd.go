package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/flowd/flowd/client"
	"github.com/flowd/flowd/store"
)

// diffValueWidth is where `flowd diff` shortens a value in text.
const diffValueWidth = 40

func newDiffCmd(e *env) *cobra.Command {
	var o clientOptions
	cmd := &cobra.Command{
		Use:   "diff ID V1 V2",
		Short: "Show what changed in a workflow between two versions",
		Long: `diff compares versions V1 and V2 of workflow ID (as "flowd history ID" lists
them) and prints every value that changed: its status, and each value of its
state added, removed or changed, by its path (state.steps.approve.status).
Objects are compared member by member, arrays as a whole. Long values are
shortened; -o json prints them in full.

-o json prints {"workflow_id", "from", "to", "changes"}: from and to are the
two versions (version, status, at, cause, actor), and changes is a JSON Patch
(RFC 6902) that turns V1 into V2: operations add, remove and replace, each
with a JSON Pointer path into {"status": …, "state": …}, the new "value", and
the value replaced or removed as "old".

A version the workflow does not have exits with status 4, as an unknown ID does.
` + clientHelp,
		Example: `  flowd diff order-1 2 5
  flowd diff order-1 0 5 -o json | jq -r '.changes[].path'`,
		Args: exactArgs("ID", "V1", "V2"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var vs [2]int64
			for i, name := range []string{"V1", "V2"} {
				n, err := strconv.ParseInt(args[i+1], 10, 64)
				if err != nil || n < 0 {
					return usageError("%s must be a version, a number from 0 on (flowd history %s lists them), not %q", name, shellQuote(args[0]), args[i+1])
				}
				vs[i] = n
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			var entries [2]*store.HistoryEntry
			for i, v := range vs {
				if entries[i], err = c.HistoryVersion(cmd.Context(), args[0], v); err != nil {
					if errors.Is(err, client.ErrNoSuchVersion) {
						return &exitCodeError{code: exitNotFound, err: err}
					}
					return o.apiFailure(err)
				}
			}
			changes, err := diffVersions(*entries[0], *entries[1])
			if err != nil {
				return err
			}
			if o.json() {
				if changes == nil {
					changes = []versionChange{}
				}
				return printJSON(e.stdout, versionDiff{WorkflowID: args[0], From: refOf(entries[0]), To: refOf(entries[1]), Changes: changes})
			}
			return printDiff(e.stdout, args[0], entries[0], entries[1], changes)
		},
	}
	o.bind(cmd, e)
	return cmd
}

// versionDiff is what `flowd diff -o json` prints.
type versionDiff struct {
	WorkflowID string          `json:"workflow_id"`
	From       versionRef      `json:"from"`
	To         versionRef      `json:"to"`
	Changes    []versionChange `json:"changes"`
}

type versionRef struct {
	Version int64     `json:"version"`
	Status  string    `json:"status"`
	At      time.Time `json:"at"`
	Cause   string    `json:"cause"`
	Actor   string    `json:"actor"`
}

func refOf(v *store.HistoryEntry) versionRef {
	return versionRef{Version: v.Version, Status: string(v.Status), At: v.At, Cause: v.Cause, Actor: v.Actor}
}

// printDiff writes the two versions, then a table of the changes.
func printDiff(w io.Writer, id string, a, b *store.HistoryEntry, changes []versionChange) error {
	fmt.Fprintf(w, "workflow %s, version %d → %d\n", clean(id), a.Version, b.Version)
	for _, v := range []*store.HistoryEntry{a, b} {
		fmt.Fprintf(w, "  version %d: %s at %s, %s (%s)\n", v.Version, clean(string(v.Status)), timestampMillis(v.At), clean(orDash(v.Cause)), clean(orDash(v.Actor)))
	}
	if len(changes) == 0 {
		_, err := fmt.Fprintln(w, "no changes")
		return err
	}
	var shortened bool
	short := func(raw []byte) string {
		if raw == nil {
			return "-"
		}
		s, cut := compactJSON(raw, diffValueWidth)
		shortened = shortened || cut
		return s
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "CHANGE\tPATH\tFROM\tTO")
	for _, ch := range changes {
		what := map[string]string{"add": "added", "remove": "removed", "replace": "changed"}[ch.Op]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", what, dottedPath(ch.Path), short(ch.Old), short(ch.Value))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if shortened {
		fmt.Fprintln(w, "(long values are shortened; -o json shows them in full)")
	}
	return nil
}
