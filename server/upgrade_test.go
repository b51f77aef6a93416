package server_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/internal/pgtest"
	"github.com/flowd/flowd/server"
)

// The databases of testdata/upgrade were written by an earlier release
// (scripts/make-upgrade-fixture; its README says which and what they hold):
// today's server migrates them in place, reads every workflow as the old
// server answered for it, and finishes every workflow in flight.
func TestUpgradeWithWorkflowsInFlight(t *testing.T) {
	for name, load := range map[string]func(t *testing.T) string{
		"sqlite":   loadSQLiteFixture,
		"postgres": loadPostgresFixture,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			checkUpgrade(t, load(t), readOldAnswers(t, name+".json"))
		})
	}
}

// The schema versions of the databases in testdata/upgrade: the
// migrations after them are the ones the test runs.
const (
	upgradeFromSQLite   = 20
	upgradeFromPostgres = 23
)

// schemaVersionQuery reads the schema version goose recorded.
const schemaVersionQuery = `SELECT max(version_id) FROM goose_db_version`

// checkSchemaVersion: the database is at the version the old release left.
func checkSchemaVersion(t *testing.T, got int64, err error, want int64) {
	t.Helper()
	if err != nil {
		t.Fatalf("schema version: %v", err)
	}
	if got != want {
		t.Fatalf("the old release's database is at schema version %d, want %d", got, want)
	}
}

// oldAnswer is what the old server answered for one workflow: its
// document and its history's versions, as JSON values.
type oldAnswer struct {
	Workflow map[string]any `json:"workflow"`
	History  []any          `json:"history"`
}

func readOldAnswers(t *testing.T, file string) map[string]oldAnswer {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "upgrade", file))
	if err != nil {
		t.Fatal(err)
	}
	var answers map[string]oldAnswer
	if err := json.Unmarshal(b, &answers); err != nil {
		t.Fatal(err)
	}
	return answers
}

// loadSQLiteFixture copies the old release's SQLite file: the test
// migrates the copy.
func loadSQLiteFixture(t *testing.T) string {
	b, err := os.ReadFile(filepath.Join("testdata", "upgrade", "sqlite.db"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "flowd.db")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var version int64
	err = db.QueryRowContext(t.Context(), schemaVersionQuery).Scan(&version)
	checkSchemaVersion(t, version, err, upgradeFromSQLite)
	return "sqlite:" + path
}

// loadPostgresFixture restores the old release's database (schema, data
// and goose's version table) into a fresh database.
func loadPostgresFixture(t *testing.T) string {
	dump, err := os.ReadFile(filepath.Join("testdata", "upgrade", "postgres.sql"))
	if err != nil {
		t.Fatal(err)
	}
	url := pgtest.NewDatabase(t)
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	// One simple query: the dump is many statements without parameters.
	if _, err := conn.PgConn().Exec(t.Context(), string(dump)).ReadAll(); err != nil {
		t.Fatalf("loading postgres.sql: %v", err)
	}
	// The dump left this session's search_path empty.
	if _, err := conn.Exec(t.Context(), `SET search_path = public`); err != nil {
		t.Fatal(err)
	}
	var version int64
	err = conn.QueryRow(t.Context(), schemaVersionQuery).Scan(&version)
	checkSchemaVersion(t, version, err, upgradeFromPostgres)
	return url
}

// calls records what the handlers were given, by handler.
type calls struct {
	mu   sync.Mutex
	seen map[string][]callRecord
}

type callRecord struct {
	Workflow string
	Attempt  int
	Index    int // -1 outside foreach
	Input    any
}

// handler records each call and answers output(input's index).
func (c *calls) handler(name string, output func(index int) string) engine.Handler {
	return func(_ context.Context, tk engine.Task) (json.RawMessage, error) {
		rec := callRecord{Workflow: tk.WorkflowID, Attempt: tk.Attempt, Index: -1}
		if tk.Index != nil {
			rec.Index = *tk.Index
		}
		if err := json.Unmarshal(tk.Input, &rec.Input); err != nil {
			return nil, fmt.Errorf("input of %s: %w", name, err)
		}
		c.mu.Lock()
		c.seen[name] = append(c.seen[name], rec)
		c.mu.Unlock()
		return json.RawMessage(output(rec.Index)), nil
	}
}

func (c *calls) of(name string) []callRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.seen[name])
}

func fixed(output string) func(int) string { return func(int) string { return output } }

func checkUpgrade(t *testing.T, db string, old map[string]oldAnswer) {
	ctx := t.Context()
	s, err := server.New(ctx, server.Config{DB: db, Addr: "127.0.0.1:0", SweepInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })

	// Migrated, before the engine runs: every workflow reads as before.
	for id, want := range old {
		got, err := s.Store().Get(ctx, id)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if diff := cmp.Diff(withoutIterationOutputs(want.Workflow), asJSON(t, got)); diff != "" {
			t.Errorf("workflow %s after the migration (-old release +now):\n%s", id, diff)
		}
		history, err := s.Store().History(ctx, id, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want.History, asJSON(t, history)); diff != "" {
			t.Errorf("history of %s after the migration (-old release +now):\n%s", id, diff)
		}
	}

	c := &calls{seen: map[string][]callRecord{}}
	handlers := map[string]engine.Handler{
		"chain-b":   c.handler("chain-b", fixed(`{"b": 2}`)),
		"chain-c":   c.handler("chain-c", fixed(`{"c": 2}`)),
		"leased":    c.handler("leased", fixed(`{"leased": true}`)),
		"paused":    c.handler("paused", fixed(`{"resumed": true}`)),
		"fanout":    c.handler("fanout", func(i int) string { return fmt.Sprintf(`{"index": %d}`, i) }),
		"nap-after": c.handler("nap-after", fixed(`{"slept": true}`)),
		"flaky":     c.handler("flaky", fixed(`{"second": true}`)),
		"child":     c.handler("child", fixed(`{"child": true}`)),
	}
	registerAndStart(t, s, handlers)
	cl := s.Client()
	if _, err := cl.PublishEvent(ctx, "upgrade-go", "k1", json.RawMessage(`{"go": true}`)); err != nil {
		t.Fatal(err)
	}

	child := childOf(t, old, "parent")
	wantOutputs := map[string]string{
		"chain":  `{"c": {"c": 2}}`,
		"leased": `{"work": {"leased": true}}`,
		"fanout": `{"each": [{"done": "before the upgrade"}, {"index": 1}, {"index": 2}]}`,
		"signal": `{"wait": {"go": true}}`,
		"nap":    `{"after": {"slept": true}}`,
		"flaky":  `{"work": {"second": true}}`,
		child:    `{"work": {"child": true}}`,
		"parent": `{"spawn": {"work": {"child": true}}}`,
	}
	deadline := time.Now().Add(10 * time.Second)
	for id, output := range wantOutputs {
		got := awaitFinished(t, s, id, deadline)
		if got["status"] != "COMPLETED" {
			t.Errorf("workflow %s is %v, want COMPLETED: %v", id, got["status"], got["state"])
			continue
		}
		if diff := cmp.Diff(decodeJSON(t, output), got["output"]); diff != "" {
			t.Errorf("output of %s (-want +got):\n%s", id, diff)
		}
	}

	// What the handlers were given: inputs rendered before the upgrade and
	// after it, attempts counted across it, no iteration run twice.
	wantCalls := map[string][]callRecord{
		"chain-b":   {{Workflow: "chain", Attempt: 1, Index: -1, Input: decodeJSON(t, `{"a": {"a": 2}}`)}},
		"chain-c":   {{Workflow: "chain", Attempt: 1, Index: -1, Input: decodeJSON(t, `{"b": {"b": 2}}`)}},
		"leased":    {{Workflow: "leased", Attempt: 2, Index: -1}},
		"nap-after": {{Workflow: "nap", Attempt: 1, Index: -1}},
		"flaky":     {{Workflow: "flaky", Attempt: 2, Index: -1}},
		"child":     {{Workflow: child, Attempt: 1, Index: -1, Input: decodeJSON(t, `{"n": 3}`)}},
	}
	for name, want := range wantCalls {
		if diff := cmp.Diff(want, c.of(name)); diff != "" {
			t.Errorf("calls of %s (-want +got):\n%s", name, diff)
		}
	}
	fanout := c.of("fanout")
	slices.SortFunc(fanout, func(a, b callRecord) int { return a.Index - b.Index })
	wantFanout := []callRecord{
		{Workflow: "fanout", Attempt: 1, Index: 1, Input: decodeJSON(t, `{"item": 2}`)},
		{Workflow: "fanout", Attempt: 1, Index: 2, Input: decodeJSON(t, `{"item": 3}`)},
	}
	if diff := cmp.Diff(wantFanout, fanout); diff != "" {
		t.Errorf("calls of fanout (-want +got):\n%s", diff)
	}

	// The paused workflow stayed paused while the others finished, its task
	// undelivered; resumed, it finishes.
	if diff := cmp.Diff(old["paused"].Workflow, getJSON(t, s, "/v1/workflows/paused")); diff != "" {
		t.Errorf("the paused workflow changed before its resume (-old release +now):\n%s", diff)
	}
	if got := c.of("paused"); len(got) != 0 {
		t.Errorf("the paused workflow's task ran before its resume: %+v", got)
	}
	if _, err := cl.Action(ctx, "paused", "resume"); err != nil {
		t.Fatal(err)
	}
	if got := awaitFinished(t, s, "paused", time.Now().Add(5*time.Second)); got["status"] != "COMPLETED" || cmp.Diff(decodeJSON(t, `{"work": {"resumed": true}}`), got["output"]) != "" {
		t.Errorf("the paused workflow after its resume: %v, output %v", got["status"], got["output"])
	}

	// The finished ones read exactly as the old release left them; every
	// history goes on from the old one, one version after another.
	for id, want := range old {
		got := getJSON(t, s, "/v1/workflows/"+id)
		if id == "done" || id == "failed" {
			if diff := cmp.Diff(want.Workflow, got); diff != "" {
				t.Errorf("finished workflow %s after the upgrade (-old release +now):\n%s", id, diff)
			}
		}
		history, _ := getJSON(t, s, "/v1/workflows/"+id+"/history")["versions"].([]any)
		for i, v := range history {
			if version := v.(map[string]any)["version"]; version != float64(i) {
				t.Errorf("history of %s: version %v at position %d", id, version, i)
			}
		}
		if len(history) < len(want.History) {
			t.Errorf("history of %s has %d versions, the old release had %d", id, len(history), len(want.History))
			continue
		}
		if diff := cmp.Diff(want.History, history[:len(want.History)]); diff != "" {
			t.Errorf("history of %s after the upgrade (-old release +now):\n%s", id, diff)
		}
		if last := history[len(history)-1].(map[string]any); last["version"] != got["version"] || last["status"] != got["status"] {
			t.Errorf("history of %s ends at version %v (%v), the workflow is at %v (%v)", id, last["version"], last["status"], got["version"], got["status"])
		}
	}
}

// childOf is the id of the one workflow that the old release started as a
// child of parent.
func childOf(t *testing.T, old map[string]oldAnswer, parent string) string {
	t.Helper()
	var children []string
	for id, a := range old {
		if ref, ok := a.Workflow["parent"].(map[string]any); ok && ref["workflow_id"] == parent {
			children = append(children, id)
		}
	}
	if len(children) != 1 {
		t.Fatalf("the old release's workflows hold %d children of %s, want 1: %v", len(children), parent, children)
	}
	return children[0]
}

// awaitFinished waits for the workflow to stop running, or for the
// deadline, and returns its document.
func awaitFinished(t *testing.T, s *server.Server, id string, deadline time.Time) map[string]any {
	t.Helper()
	for {
		got := getJSON(t, s, "/v1/workflows/"+id)
		if st := got["status"]; st != "RUNNING" && st != "PENDING" || time.Now().After(deadline) {
			return got
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// getJSON is the server's answer to GET path, as a JSON value.
func getJSON(t *testing.T, s *server.Server, path string) map[string]any {
	t.Helper()
	resp, err := http.Get(s.URL() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s (%v)", path, resp.StatusCode, b, err)
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// asJSON is v as the API encodes it, decoded into plain JSON values.
func asJSON(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return decodeJSON(t, string(b))
}

func decodeJSON(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return v
}

// withoutIterationOutputs is an instance document of the old release as
// this one shows it: a running foreach step's bookkeeping no longer holds
// the outputs of its completed iterations (they moved to the iterations'
// task rows, and come back in the step's output once it completes).
func withoutIterationOutputs(workflow any) any {
	doc, _ := workflow.(map[string]any)
	state, _ := doc["state"].(map[string]any)
	steps, _ := state["steps"].(map[string]any)
	out := maps.Clone(doc)
	if steps == nil {
		return workflow
	}
	newSteps := map[string]any{}
	for id, v := range steps {
		newSteps[id] = v
		step, _ := v.(map[string]any)
		fe, _ := step["foreach"].(map[string]any)
		if _, ok := fe["outputs"]; !ok {
			continue
		}
		fe = maps.Clone(fe)
		delete(fe, "outputs")
		step = maps.Clone(step)
		step["foreach"] = fe
		newSteps[id] = step
	}
	newState := maps.Clone(state)
	newState["steps"] = newSteps
	out["state"] = newState
	return out
}
