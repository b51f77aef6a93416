package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// Widths at which human output shortens a JSON value; -o json never does.
const (
	valueWidth  = 70 // input, variables, other state keys
	outputWidth = 50 // a step's output or error in the steps table
	changeWidth = 100
)

// printJSON writes v as indented JSON, as the API sends it.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
}

// printInstance writes the `flowd get` block: key: value lines, then the
// variables, other state keys and steps as indented tables.
func printInstance(w io.Writer, inst *workflow.Instance) error {
	return printInstanceSteps(w, inst, nil)
}

// printInstanceSteps is printInstance with the steps of graph (the
// definition's, in graph order) listed first, in that order.
func printInstanceSteps(w io.Writer, inst *workflow.Instance, graph []string) error {
	var shortened bool
	short := func(raw json.RawMessage, width int) string {
		s, cut := compactJSON(raw, width)
		shortened = shortened || cut
		return s
	}
	def := inst.Definition
	if def == "" {
		def = "(free-form)"
	}
	// The keys are fixed, so a fixed width aligns them; tables below are
	// indented under their key.
	field := func(key, value string) { fmt.Fprintf(w, "%-13s%s\n", key+":", value) }
	field("id", clean(inst.ID))
	field("definition", clean(def))
	field("status", clean(string(inst.Status)))
	if inst.Priority != 0 {
		field("priority", strconv.Itoa(inst.Priority))
	}
	field("version", strconv.FormatInt(inst.Version, 10))
	field("created", timestamp(inst.CreatedAt))
	field("updated", timestamp(inst.UpdatedAt))
	if inst.RerunOf != "" {
		field("re-run of", clean(inst.RerunOf))
	}
	if len(inst.Reruns) > 0 {
		// The newest first, as the server lists them.
		ids := make([]string, len(inst.Reruns))
		for i, id := range inst.Reruns {
			ids[i] = clean(id)
		}
		field("re-runs", strings.Join(ids, ", "))
	}
	field("input", short(inst.Input, valueWidth))
	if inst.Output != nil {
		// What a completed definition-based instance gave.
		field("output", short(inst.Output, valueWidth))
	}
	if len(inst.Error) > 0 {
		// What a Serverless Workflow instance failed with, in full: it is
		// the first thing to read of a failed instance.
		if err := printErrorObject(w, inst.Error); err != nil {
			return err
		}
	}
	for _, sec := range []struct {
		key    string
		values map[string]json.RawMessage
	}{{"search", inst.Search}, {"variables", inst.State.Variables}, {"other state", inst.State.Extra}} {
		if len(sec.values) == 0 {
			if sec.key == "variables" {
				field(sec.key, "(none)")
			}
			continue
		}
		fmt.Fprintln(w, sec.key+":")
		tw := newTable(w)
		for _, k := range sortedKeys(sec.values) {
			fmt.Fprintf(tw, "  %s\t%s\n", clean(k), short(sec.values[k], valueWidth))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(inst.State.Steps) == 0 {
		field("steps", "(none)")
	}
	if len(inst.State.Steps) > 0 {
		fmt.Fprintln(w, "steps:")
		tw := newTable(w)
		fmt.Fprintln(tw, "  STEP\tSTATUS\tATTEMPTS\tOUTPUT / ERROR")
		for _, id := range stepOrder(inst.State.Steps, graph) {
			st := inst.State.Steps[id]
			result := "-"
			switch {
			case st == nil:
			case st.Error != "" || len(st.Extra["error"]) > 0:
				msg := clean(stepError(st))
				result = "error: " + shorten(msg, outputWidth)
				shortened = shortened || shorten(msg, outputWidth) != msg
			case st.Output != nil:
				result = short(st.Output, outputWidth)
			default:
				result = waitingFor(st)
				if result == "-" {
					result = serverlessTask(inst, id)
				}
			}
			if p := itemProgress(st); p != "" {
				result = p + "; " + result
				if st.Output == nil && st.Error == "" {
					result = p
				}
			}
			status, attempts := "-", "-"
			if st != nil {
				status, attempts = clean(string(st.Status)), strconv.Itoa(st.Attempts)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", clean(id), status, attempts, result)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if shortened {
		fmt.Fprintln(w, "(long values are shortened; -o json shows them in full)")
	}
	return nil
}

// printList writes the `flowd list` table.
func printList(w io.Writer, insts []*workflow.Instance) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "ID\tDEFINITION\tSTATUS\tVERSION\tSTEPS\tCREATED\tUPDATED")
	for _, inst := range insts {
		def := inst.Definition
		if def == "" {
			def = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", clean(inst.ID), clean(def), clean(string(inst.Status)),
			inst.Version, stepProgress(inst.State.Steps), timestamp(inst.CreatedAt), timestamp(inst.UpdatedAt))
	}
	return tw.Flush()
}

// stepProgress is "done/total" (done: COMPLETED or SKIPPED), plus the failed
// ones, or "-" for an instance without steps.
func stepProgress(steps map[string]*workflow.StepState) string {
	if len(steps) == 0 {
		return "-"
	}
	done, failed := 0, 0
	for _, st := range steps {
		switch {
		case st == nil:
		case st.Status == workflow.StepCompleted || st.Status == workflow.StepSkipped:
			done++
		case st.Status == workflow.StepFailed:
			failed++
		}
	}
	s := fmt.Sprintf("%d/%d", done, len(steps))
	if failed > 0 {
		s += fmt.Sprintf(" (%d failed)", failed)
	}
	return s
}

// printHistory writes the `flowd history` table: who wrote each version
// (ACTOR), why, and a summary of what it changed. The errors a version
// recorded end its line in full: they say why an attempt failed.
func printHistory(w io.Writer, versions []store.HistoryEntry) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "VERSION\tSTATUS\tAT\tACTOR\tCAUSE\tCHANGES")
	for i, v := range versions {
		change := "created"
		if i > 0 {
			summary, errs := describeChange(versions[i-1], v)
			if summary != "-" || len(errs) == 0 {
				errs = append([]string{shorten(summary, changeWidth)}, errs...)
			}
			change = strings.Join(errs, "; ")
		}
		cause := v.Cause
		if cause == "" {
			cause = "-"
		}
		actor := v.Actor
		if actor == "" {
			actor = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", v.Version, clean(string(v.Status)), timestampMillis(v.At), clean(actor), clean(cause), change)
	}
	return tw.Flush()
}

// describeChange summarises prev → cur: "status: A → B", then each variable,
// step and other state key (state.KEY) added ("+name=value"), removed
// ("-name") or changed ("name: old → new"; for a step whose status stayed,
// what else changed: its attempts, its items done). errs are the step
// errors cur recorded ("step ID error: message"), whole.
func describeChange(prev, cur store.HistoryEntry) (summary string, errs []string) {
	var parts []string
	if prev.Status != cur.Status {
		parts = append(parts, fmt.Sprintf("status: %s → %s", clean(string(prev.Status)), clean(string(cur.Status))))
	}
	parts = append(parts, diffValues("", prev.State.Variables, cur.State.Variables)...)
	for _, id := range unionKeys(prev.State.Steps, cur.State.Steps) {
		p, okp := prev.State.Steps[id]
		c, okc := cur.State.Steps[id]
		name := "step " + clean(id)
		if okc && c != nil && (c.Error != "" || len(c.Extra["error"]) > 0) {
			if msg := stepError(c); !okp || p == nil || stepError(p) != msg || p.Attempts != c.Attempts {
				errs = append(errs, name+" error: "+clean(msg))
			}
		}
		switch {
		case !okp:
			parts = append(parts, "+"+name+"="+stepStatus(c))
		case !okc:
			parts = append(parts, "-"+name)
		case stepStatus(p) != stepStatus(c):
			parts = append(parts, fmt.Sprintf("%s: %s → %s", name, stepStatus(p), stepStatus(c)))
		case !sameStep(p, c):
			if d := stepDetail(p, c); d != "" {
				parts = append(parts, name+": "+d)
			}
		}
	}
	parts = append(parts, diffValues("state.", prev.State.Extra, cur.State.Extra)...)
	if len(parts) == 0 {
		return "-", errs
	}
	return strings.Join(parts, ", "), errs
}

// stepDetail says what changed in a step that kept its status: its
// attempts, its items done, else just that it changed; "" when only its
// error did (which the errors of the version show).
func stepDetail(p, c *workflow.StepState) string {
	var ds []string
	if p != nil && c != nil {
		if p.Attempts != c.Attempts {
			ds = append(ds, fmt.Sprintf("attempts %d → %d", p.Attempts, c.Attempts))
		}
		if ip, ic := itemsDone(p), itemsDone(c); ic != "" && ip != ic {
			ds = append(ds, "items done "+orDash(ip)+" → "+ic)
		}
		if len(ds) == 0 && (c.Error != "" || len(c.Extra["error"]) > 0) && stepError(p) != stepError(c) {
			return ""
		}
	}
	if len(ds) == 0 {
		return "changed"
	}
	return strings.Join(ds, ", ")
}

// itemsDone is a foreach step's "done/total" ("" for another step).
func itemsDone(st *workflow.StepState) string {
	var it struct{ Total, Completed int }
	raw, ok := st.Extra["iterations"]
	if !ok || json.Unmarshal(raw, &it) != nil {
		return ""
	}
	return fmt.Sprintf("%d/%d", it.Completed, it.Total)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func diffValues(prefix string, prev, cur map[string]json.RawMessage) []string {
	const width = 24
	var parts []string
	for _, k := range unionKeys(prev, cur) {
		p, okp := prev[k]
		c, okc := cur[k]
		name := prefix + clean(k)
		switch {
		case !okp:
			v, _ := compactJSON(c, width)
			parts = append(parts, "+"+name+"="+v)
		case !okc:
			parts = append(parts, "-"+name)
		case !jsonEqual(p, c):
			old, _ := compactJSON(p, width)
			v, _ := compactJSON(c, width)
			parts = append(parts, name+": "+old+" → "+v)
		}
	}
	return parts
}

func stepStatus(st *workflow.StepState) string {
	if st == nil {
		return "-"
	}
	return clean(string(st.Status))
}

func sameStep(a, b *workflow.StepState) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return jsonEqual(ja, jb)
}

// jsonEqual compares two JSON values by meaning, not by spelling.
func jsonEqual(a, b json.RawMessage) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return bytes.Equal(a, b)
	}
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	return bytes.Equal(ja, jb)
}

// compactJSON renders raw on one line, shortened to width runes; it reports
// whether it shortened. Missing values show as "-".
func compactJSON(raw json.RawMessage, width int) (string, bool) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return "-", false
	}
	var buf bytes.Buffer
	s := string(raw)
	if json.Compact(&buf, raw) == nil {
		s = buf.String()
	}
	s = clean(s)
	out := shorten(s, width)
	return out, out != s
}

// shorten cuts s to width runes, marking the cut with "…".
func shorten(s string, width int) string {
	if utf8.RuneCountInString(s) <= width {
		return s
	}
	r := []rune(s)
	return string(r[:width-1]) + "…"
}

// clean makes server-supplied text safe for a terminal: control characters
// (escape sequences, newlines, tabs that would break the columns) are shown
// escaped instead of being interpreted.
func clean(s string) string {
	if !strings.ContainsFunc(s, unicode.IsControl) && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == utf8.RuneError:
			b.WriteString(`\ufffd`)
		case unicode.IsControl(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// timestampMillis is timestamp to the millisecond: versions a second
// apart, or less, still read in order.
func timestampMillis(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// timestamp formats t in UTC, to the second; the zero time is "-".
func timestamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:/=@+,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func unionKeys[V any](a, b map[string]V) []string {
	seen := make(map[string]V, len(a)+len(b))
	for k, v := range a {
		seen[k] = v
	}
	for k, v := range b {
		seen[k] = v
	}
	return sortedKeys(seen)
}

// stepError is a failed step's error: its message, or an error object's
// type and message (a code workflow's event wait that timed out).
func stepError(st *workflow.StepState) string {
	if st.Error != "" {
		return st.Error
	}
	var e struct{ Type, Message string }
	if json.Unmarshal(st.Extra["error"], &e) == nil && e.Message != "" {
		return e.Type + ": " + e.Message
	}
	return string(st.Extra["error"])
}

// waitingFor says what a code workflow's waiting entry waits for: a
// sleep's end, an event (and when it times out), a child's definition; "-"
// for anything else.
func waitingFor(st *workflow.StepState) string {
	text := func(key string) string {
		var v string
		_ = json.Unmarshal(st.Extra[key], &v)
		return clean(v)
	}
	var ev struct{ Name, Key string }
	switch {
	case text("until") != "":
		return "until " + text("until")
	case json.Unmarshal(st.Extra["event"], &ev) == nil && ev.Name != "":
		s := "event " + clean(ev.Name)
		if ev.Key != "" {
			s += " key " + clean(ev.Key)
		}
		if t := text("timeout_at"); t != "" {
			s += ", times out " + t
		}
		return s
	case text("definition") != "":
		return "child workflow of " + text("definition")
	}
	return "-"
}
