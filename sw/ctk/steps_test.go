package ctk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flowd/flowd/httpapi"
	"github.com/flowd/flowd/workflow"
)

// runDeadline bounds how long a scenario's workflow may run. It is no
// timing assertion: every kit workflow finishes in well under a second, and
// the bound only turns a hung run into a failure instead of a stuck test.
const runDeadline = 30 * time.Second

// run is what the steps of one scenario share.
type run struct {
	api      *api
	document []byte          // the workflow definition, YAML as written in the kit
	name     string          // its document.name
	input    json.RawMessage // the workflow input ({} unless given)
	inst     *instance       // the finished instance, once executed
	causes   []string        // the causes of its history, in version order
}

// instance is what the steps read of GET /v1/workflows/{id}.
type instance struct {
	ID     string          `json:"id"`
	Status workflow.Status `json:"status"`
	Output json.RawMessage `json:"output"`
	Error  json.RawMessage `json:"error"`
}

// stepDef is a step phrase of the kit and what it does. Doc says whether the
// step takes a doc string; the submatches of Pattern are its arguments.
type stepDef struct {
	Pattern *regexp.Regexp
	Doc     bool
	Do      func(ctx context.Context, r *run, args []string, doc string) error
}

// steps are every step phrase the kit uses. The patterns are anchored: a
// phrase that matches none of them fails its scenario.
var steps = []stepDef{
	{regexp.MustCompile(`^a workflow with definition:$`), true, defineWorkflow},
	{regexp.MustCompile(`^(?:given )?the workflow input is:$`), true, setInput},
	{regexp.MustCompile(`^the workflow is executed$`), false, execute},
	{regexp.MustCompile(`^the workflow should complete$`), false, shouldComplete},
	{regexp.MustCompile(`^the workflow should complete with output:$`), true, shouldCompleteWith},
	{regexp.MustCompile(`^the workflow should fault$`), false, shouldFault},
	{regexp.MustCompile(`^the workflow should fault with error:$`), true, shouldFaultWith},
	{regexp.MustCompile(`^the workflow output should have properties ((?:'[^']+'(?:, )?)+)$`), false, shouldHaveProperties},
	{regexp.MustCompile(`^the workflow output should have a '([^']+)' property with value:$`), true, shouldHaveValue},
	{regexp.MustCompile(`^the workflow output should have a '([^']+)' property containing (\d+) items?$`), false, shouldHaveItems},
	{regexp.MustCompile(`^(\S+) should run first$`), false, shouldRunFirst},
	{regexp.MustCompile(`^(\S+) should run last$`), false, shouldRunLast},
	{regexp.MustCompile(`^(\S+) should run after (\S+)$`), false, shouldRunAfter},
}

// runScenario runs the steps of sc in order. The first one that fails, or
// that no definition matches, ends the scenario with an error naming its
// line: an unknown phrase is a failure, never a skipped step.
func runScenario(ctx context.Context, f *feature, sc *scenario, a *api) error {
	r := &run{api: a, input: json.RawMessage(`{}`)}
	for _, s := range sc.Steps {
		where := fmt.Sprintf("%s:%d: %q", f.Path, s.Line, s.Keyword+" "+s.Text)
		def, args := matchStep(s.Text)
		switch {
		case def == nil:
			return fmt.Errorf("%s: no step definition matches this phrase", where)
		case def.Doc && !s.HasDoc:
			return fmt.Errorf("%s: the step needs a doc string", where)
		case !def.Doc && s.HasDoc:
			return fmt.Errorf("%s: the step takes no doc string", where)
		}
		if err := def.Do(ctx, r, args, s.Doc); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
	}
	return nil
}

// matchStep returns the definition matching text and its arguments, or nil.
func matchStep(text string) (*stepDef, []string) {
	for i := range steps {
		if m := steps[i].Pattern.FindStringSubmatch(text); m != nil {
			return &steps[i], m[1:]
		}
	}
	return nil, nil
}

func defineWorkflow(_ context.Context, r *run, _ []string, doc string) error {
	data, err := workflow.DocumentJSON([]byte(doc), "definition")
	if err != nil {
		return fmt.Errorf("the definition is not YAML: %w", err)
	}
	var d struct {
		Document struct {
			Name string `json:"name"`
		} `json:"document"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return fmt.Errorf("the definition is not a document: %w", err)
	}
	if d.Document.Name == "" {
		return errors.New("the definition has no document.name")
	}
	r.document, r.name = []byte(doc), d.Document.Name
	return nil
}

func setInput(_ context.Context, r *run, _ []string, doc string) error {
	v, err := yamlValue(doc)
	if err != nil {
		return err
	}
	r.input, err = json.Marshal(v)
	return err
}

// execute stores the definition under its document.name, starts it, and
// waits until the instance stops (COMPLETED, FAILED, CANCELLED, TIMED_OUT).
func execute(ctx context.Context, r *run, _ []string, _ string) error {
	if r.document == nil {
		return errors.New("no workflow defined before it is executed")
	}
	path := "/v1/definitions/" + url.PathEscape(r.name)
	if err := r.api.do(ctx, "PUT", path, "application/yaml", r.document, nil); err != nil {
		return err
	}
	body, err := json.Marshal(httpapi.CreateWorkflowRequest{Definition: r.name, Input: r.input})
	if err != nil {
		return err
	}
	var inst instance
	if err := r.api.do(ctx, "POST", "/v1/workflows", "application/json", body, &inst); err != nil {
		return err
	}
	deadline := time.Now().Add(runDeadline)
	for !inst.Status.StopsSteps() {
		if time.Now().After(deadline) {
			return fmt.Errorf("instance %s still %s after %v", inst.ID, inst.Status, runDeadline)
		}
		time.Sleep(10 * time.Millisecond)
		if err := r.api.do(ctx, "GET", "/v1/workflows/"+url.PathEscape(inst.ID), "", nil, &inst); err != nil {
			return err
		}
	}
	r.inst, r.causes = &inst, nil
	var h httpapi.HistoryResponse
	if err := r.api.do(ctx, "GET", "/v1/workflows/"+url.PathEscape(inst.ID)+"/history", "", nil, &h); err != nil {
		return err
	}
	if h.NextSince != nil {
		return fmt.Errorf("history of %s has more than one page", inst.ID)
	}
	for _, v := range h.Versions {
		r.causes = append(r.causes, v.Cause)
	}
	return nil
}

// finished returns the instance, or an error when the workflow was not
// executed yet.
func (r *run) finished() (*instance, error) {
	if r.inst == nil {
		return nil, errors.New("the workflow was not executed")
	}
	return r.inst, nil
}

// describe says how an instance ended, for failure messages.
func (r *run) describe() string {
	return fmt.Sprintf("instance %s is %s, output %s, error %s; history causes %q",
		r.inst.ID, r.inst.Status, r.inst.Output, r.inst.Error, r.causes)
}

func shouldComplete(_ context.Context, r *run, _ []string, _ string) error {
	inst, err := r.finished()
	if err != nil {
		return err
	}
	if inst.Status != workflow.StatusCompleted {
		return fmt.Errorf("want COMPLETED: %s", r.describe())
	}
	return nil
}

func shouldCompleteWith(ctx context.Context, r *run, args []string, doc string) error {
	if err := shouldComplete(ctx, r, args, doc); err != nil {
		return err
	}
	want, err := yamlValue(doc)
	if err != nil {
		return err
	}
	got, err := jsonValue(r.inst.Output)
	if err != nil {
		return err
	}
	if !reflect.DeepEqual(got, want) {
		return fmt.Errorf("output %s, want %s", r.inst.Output, mustJSON(want))
	}
	return nil
}

// shouldFault checks that the instance FAILED with a DSL error: an object
// with at least a type.
func shouldFault(_ context.Context, r *run, _ []string, _ string) error {
	inst, err := r.finished()
	if err != nil {
		return err
	}
	if inst.Status != workflow.StatusFailed {
		return fmt.Errorf("want FAILED: %s", r.describe())
	}
	var e map[string]any
	if err := json.Unmarshal(inst.Error, &e); err != nil || e["type"] == nil {
		return fmt.Errorf("a faulted instance has an error object with a type: %s", r.describe())
	}
	return nil
}

// shouldFaultWith compares the error field by field: every field the kit
// gives must be there with that value; fields it does not give are free.
func shouldFaultWith(ctx context.Context, r *run, args []string, doc string) error {
	if err := shouldFault(ctx, r, args, doc); err != nil {
		return err
	}
	want, err := yamlValue(doc)
	if err != nil {
		return err
	}
	fields, ok := want.(map[string]any)
	if !ok {
		return fmt.Errorf("the expected error is not a mapping: %s", doc)
	}
	got, err := jsonValue(r.inst.Error)
	if err != nil {
		return err
	}
	gotFields, ok := got.(map[string]any)
	if !ok {
		return fmt.Errorf("the error is not an object: %s", r.inst.Error)
	}
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if !reflect.DeepEqual(gotFields[k], fields[k]) {
			return fmt.Errorf("error field %q is %s, want %s (error %s)", k, mustJSON(gotFields[k]), mustJSON(fields[k]), r.inst.Error)
		}
	}
	return nil
}

// quoted is one 'name' in a list of properties.
var quoted = regexp.MustCompile(`'([^']+)'`)

func shouldHaveProperties(ctx context.Context, r *run, args []string, doc string) error {
	out, err := r.completedOutput(ctx, doc)
	if err != nil {
		return err
	}
	var missing []string
	for _, m := range quoted.FindAllStringSubmatch(args[0], -1) {
		if _, ok := property(out, m[1]); !ok {
			missing = append(missing, m[1])
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("output has no %s: %s", strings.Join(missing, ", "), r.inst.Output)
	}
	return nil
}

func shouldHaveValue(ctx context.Context, r *run, args []string, doc string) error {
	out, err := r.completedOutput(ctx, doc)
	if err != nil {
		return err
	}
	want, err := yamlValue(doc)
	if err != nil {
		return err
	}
	got, ok := property(out, args[0])
	switch {
	case !ok:
		return fmt.Errorf("output has no %s: %s", args[0], r.inst.Output)
	case !reflect.DeepEqual(got, want):
		return fmt.Errorf("output %s is %s, want %s", args[0], mustJSON(got), mustJSON(want))
	}
	return nil
}

func shouldHaveItems(ctx context.Context, r *run, args []string, doc string) error {
	out, err := r.completedOutput(ctx, doc)
	if err != nil {
		return err
	}
	want, err := strconv.Atoi(args[1])
	if err != nil {
		return err
	}
	got, ok := property(out, args[0])
	items, isList := got.([]any)
	switch {
	case !ok:
		return fmt.Errorf("output has no %s: %s", args[0], r.inst.Output)
	case !isList:
		return fmt.Errorf("output %s is %s, not a list", args[0], mustJSON(got))
	case len(items) != want:
		return fmt.Errorf("output %s has %d items, want %d: %s", args[0], len(items), want, mustJSON(got))
	}
	return nil
}

// completedOutput returns the output of a completed instance, decoded: the
// output steps follow a completion step, and say nothing of a faulted one.
func (r *run) completedOutput(ctx context.Context, doc string) (any, error) {
	if err := shouldComplete(ctx, r, nil, doc); err != nil {
		return nil, err
	}
	return jsonValue(r.inst.Output)
}

// property follows a dotted path ("request.headers") through objects.
func property(v any, path string) (any, bool) {
	for _, name := range strings.Split(path, ".") {
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = obj[name]; !ok {
			return nil, false
		}
	}
	return v, true
}

// runOrder lists the tasks that completed, in the order their versions were
// written: the last segment of the pointer of each "task <pointer> completed"
// history cause.
func (r *run) runOrder() ([]string, error) {
	if _, err := r.finished(); err != nil {
		return nil, err
	}
	var order []string
	for _, c := range r.causes {
		rest, ok := strings.CutPrefix(c, "task ")
		if !ok {
			continue
		}
		pointer, ok := strings.CutSuffix(rest, " completed")
		if !ok {
			continue
		}
		name := pointer[strings.LastIndex(pointer, "/")+1:]
		// JSON pointer escapes (RFC 6901): ~1 is "/", ~0 is "~".
		order = append(order, strings.ReplaceAll(strings.ReplaceAll(name, "~1", "/"), "~0", "~"))
	}
	if len(order) == 0 {
		return nil, fmt.Errorf("no task completion in the history: %s", r.describe())
	}
	return order, nil
}

func shouldRunFirst(_ context.Context, r *run, args []string, _ string) error {
	order, err := r.runOrder()
	if err != nil {
		return err
	}
	if order[0] != args[0] {
		return fmt.Errorf("%s ran first, not %s: run order %q", order[0], args[0], order)
	}
	return nil
}

func shouldRunLast(_ context.Context, r *run, args []string, _ string) error {
	order, err := r.runOrder()
	if err != nil {
		return err
	}
	if last := order[len(order)-1]; last != args[0] {
		return fmt.Errorf("%s ran last, not %s: run order %q", last, args[0], order)
	}
	return nil
}

// shouldRunAfter: the later task's first completion comes after the earlier
// one's first completion.
func shouldRunAfter(_ context.Context, r *run, args []string, _ string) error {
	order, err := r.runOrder()
	if err != nil {
		return err
	}
	later, earlier := slices.Index(order, args[0]), slices.Index(order, args[1])
	switch {
	case later < 0:
		return fmt.Errorf("%s never ran: run order %q", args[0], order)
	case earlier < 0:
		return fmt.Errorf("%s never ran: run order %q", args[1], order)
	case later < earlier:
		return fmt.Errorf("%s ran before %s: run order %q", args[0], args[1], order)
	}
	return nil
}

// yamlValue decodes a YAML doc string (YAML 1.2 scalars, as flowd reads
// documents) into the values encoding/json decodes into, so that it
// compares with reflect.DeepEqual to a decoded JSON document.
func yamlValue(doc string) (any, error) {
	data, err := workflow.DocumentJSON([]byte(doc), "doc string")
	if err != nil {
		return nil, fmt.Errorf("the doc string is not YAML: %w", err)
	}
	return jsonValue(data)
}

func jsonValue(data []byte) (any, error) {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", data, err)
	}
	return v, nil
}

// mustJSON encodes v for messages; the values here all come from JSON,
// which encode.
func mustJSON(v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		return []byte(fmt.Sprintf("%#v", v))
	}
	return data
}
