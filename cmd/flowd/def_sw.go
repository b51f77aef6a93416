package main

import (
	"fmt"

	"github.com/flowd/flowd/sw"
	"github.com/flowd/flowd/workflow"
)

// serverlessSummary is what `flowd def list` shows of a Serverless Workflow
// document: its tasks at every depth, and its timeout ("-" when none).
func serverlessSummary(doc []byte) (steps, timeout string) {
	w, err := sw.Parse(doc)
	if err != nil {
		// Stored documents were valid when stored; one this binary cannot
		// read (a newer server's) is still listed.
		return "sw: ?", "-"
	}
	timeout = "-"
	if w.Timeout > 0 {
		timeout = workflow.Duration(w.Timeout).String()
	}
	n := w.TaskCount()
	return fmt.Sprintf("sw: %d task%s", n, map[bool]string{true: "s"}[n != 1]), timeout
}
