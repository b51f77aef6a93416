package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/flowd/flowd/workflow"
)

// itemProgress is a foreach step's progress, "2/5 items done, 1 running,
// 1 failed" (the parts that are not 0), or "" for another step.
func itemProgress(st *workflow.StepState) string {
	if st == nil {
		return ""
	}
	var it struct{ Total, Completed, Failed, Running int }
	raw, ok := st.Extra["iterations"]
	if !ok || json.Unmarshal(raw, &it) != nil {
		return ""
	}
	s := fmt.Sprintf("%d/%d items done", it.Completed, it.Total)
	if it.Running > 0 {
		s += fmt.Sprintf(", %d running", it.Running)
	}
	if it.Failed > 0 {
		s += fmt.Sprintf(", %d failed", it.Failed)
	}
	return s
}

// serverlessTask names the task of the document a Serverless Workflow
// instance's step runs ("task /do/1/charge"), or "-".
func serverlessTask(inst *workflow.Instance, id string) string {
	var rt struct {
		Pending map[string]struct{ Pointer string } `json:"pending"`
	}
	if json.Unmarshal(inst.State.Extra[workflow.ServerlessStateKey], &rt) != nil {
		return "-"
	}
	if p := rt.Pending[id].Pointer; p != "" {
		return "task " + clean(p)
	}
	return "-"
}

// errorFieldOrder is the order of a Serverless Workflow error's fields.
var errorFieldOrder = []string{"type", "status", "title", "detail", "instance"}

// printErrorObject writes an error object one field a line, each in full.
func printErrorObject(w io.Writer, raw json.RawMessage) error {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		_, err := fmt.Fprintf(w, "%-13s%s\n", "error:", clean(string(raw)))
		return err
	}
	keys := sortedKeys(fields)
	slices.SortStableFunc(keys, func(a, b string) int { return rankOf(errorFieldOrder, a) - rankOf(errorFieldOrder, b) })
	fmt.Fprintln(w, "error:")
	tw := newTable(w)
	for _, k := range keys {
		var text string
		if json.Unmarshal(fields[k], &text) != nil {
			text, _ = compactJSON(fields[k], len(fields[k])+1)
		}
		fmt.Fprintf(tw, "  %s\t%s\n", clean(k)+":", clean(strings.TrimSpace(text)))
	}
	return tw.Flush()
}

func rankOf(order []string, k string) int {
	if i := slices.Index(order, k); i >= 0 {
		return i
	}
	return len(order)
}
