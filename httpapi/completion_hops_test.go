package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/httpapi"
	"github.com/flowd/flowd/metrics"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/store/observed"
	"github.com/flowd/flowd/workflow"
)

// flowdPrefix starts the name of every function of flowd.
const flowdPrefix = "github.com/flowd/flowd/"

// completeHandler is the handler of POST /v1/tasks/{task_id}/complete.
const completeHandler = flowdPrefix + "httpapi.(*Server).completeTask"

// stackAtApply records, for every Apply made while a request of the
// complete handler is on the goroutine's stack, the functions of flowd
// between that handler and this store, innermost first: named functions
// only (closures, ".func", run inside the function that defines them), and
// none of this test's.
type stackAtApply struct {
	store.Backend
	mu     sync.Mutex
	stacks [][]string
}

func (s *stackAtApply) Apply(ctx context.Context, w *store.Write) (*workflow.Instance, error) {
	pcs := make([]uintptr, 128)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(1, pcs)])
	var between []string
	for {
		f, more := frames.Next()
		if f.Function == completeHandler {
			s.mu.Lock()
			s.stacks = append(s.stacks, between)
			s.mu.Unlock()
			break
		}
		if strings.HasPrefix(f.Function, flowdPrefix) && !strings.Contains(f.Function, ".func") &&
			!strings.HasPrefix(f.Function, flowdPrefix+"httpapi_test.") {
			between = append(between, f.Function)
		}
		if !more {
			break // not a completion's write
		}
	}
	return s.Backend.Apply(ctx, w)
}

// documentedHops is the section of docs/architecture.md that follows a
// remote worker's completion to the database, and the number of flowd
// functions between the handler and the store it says the write passes.
func documentedHops(t *testing.T) (section string, functions int) {
	t.Helper()
	doc, err := os.ReadFile("../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	const title = "## A remote worker's completion, hop by hop\n"
	_, section, ok := strings.Cut(string(doc), title)
	if !ok {
		t.Fatalf("docs/architecture.md has no section %q", strings.TrimSpace(title))
	}
	section, _, _ = strings.Cut(section, "\n## ")
	m := regexp.MustCompile(`(\d+) functions of flowd between`).FindStringSubmatch(section)
	if m == nil {
		t.Fatal(`the hop-by-hop section does not say "N functions of flowd between" the handler and the store`)
	}
	n, _ := strconv.Atoi(m[1])
	return section, n
}

// A remote worker's completion (POST /v1/tasks/{id}/complete through the
// server, the store observed as flowd serve observes it) reaches the
// store's Apply through as many functions of flowd as docs/architecture.md
// says, each of them named there: the path a completion takes is short,
// and the section that shows it stays true.
func TestCompletionHops(t *testing.T) {
	section, documented := documentedHops(t)
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			base := b.open(t)
			t.Cleanup(func() { base.Close() })
			if _, err := base.Migrate(t.Context()); err != nil {
				t.Fatal(err)
			}
			rec := &stackAtApply{Backend: base}
			st := observed.Wrap(rec, nil, metrics.New())
			none := 0
			eng, err := engine.New(engine.Config{Store: st, Workers: &none})
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := eng.PutDefinition(t.Context(), []byte("name: one\nsteps:\n  - {id: a, type: task, handler: remote}\n")); err != nil {
				t.Fatal(err)
			}
			if _, err := eng.StartWorkflow(t.Context(), engine.StartParams{Definition: "one"}); err != nil {
				t.Fatal(err)
			}
			task, err := eng.Poll(t.Context(), engine.PollParams{Worker: "w", Handlers: []string{"remote"}})
			if err != nil || task == nil {
				t.Fatalf("poll: %v, %v", task, err)
			}
			handler, err := httpapi.NewServer(httpapi.Config{Store: st, Engine: eng})
			if err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest("POST", "http://localhost/v1/tasks/"+task.ID+"/complete",
				strings.NewReader(`{"lease": "`+task.Lease+`", "output": {"ok": true}}`))
			req.Header.Set("Content-Type", "application/json")
			resp := httptest.NewRecorder()
			handler.ServeHTTP(resp, req)
			if resp.Code != http.StatusOK {
				t.Fatalf("complete: %d %s", resp.Code, resp.Body)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if len(rec.stacks) != 1 {
				t.Fatalf("the completion made %d writes through Apply, want 1", len(rec.stacks))
			}
			between := rec.stacks[0]
			path := slices.Clone(between)
			slices.Reverse(path)
			t.Logf("handler → %s → store", strings.Join(path, " → "))
			if len(between) != documented {
				t.Errorf("%d functions of flowd between the handler and the store's Apply, docs/architecture.md says %d: %v",
					len(between), documented, between)
			}
			for _, f := range between {
				name := f[strings.LastIndexAny(f, ".)")+1:]
				if !strings.Contains(section, name) {
					t.Errorf("docs/architecture.md's hop-by-hop section does not name %s", f)
				}
			}
		})
	}
}
