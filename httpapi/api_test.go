package httpapi_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/flowd/flowd/httpapi"
	"github.com/flowd/flowd/httpapi/apitest"
	"github.com/flowd/flowd/internal/pgtest"
	"github.com/flowd/flowd/metrics"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/store/postgres"
	"github.com/flowd/flowd/store/sqlite"
	"github.com/flowd/flowd/workflow"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// backends opens a fresh store of each kind.
var backends = []struct {
	name string
	open func(t *testing.T) store.Backend
}{
	{"sqlite", func(t *testing.T) store.Backend {
		st, err := sqlite.Open(context.Background(), "sqlite:"+t.TempDir()+"/flowd.db", sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}},
	{"postgres", func(t *testing.T) store.Backend {
		st, err := postgres.Open(context.Background(), pgtest.NewDatabase(t), postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}},
}

// TestAPI runs the API suite against httpapi on httptest, on both stores (the
// real `flowd serve` runs it too, in cmd/flowd).
func TestAPI(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			seen := newOperationSet(t)
			apitest.Run(t, func(t *testing.T, tokens ...string) string {
				st := b.open(t)
				t.Cleanup(func() { st.Close() })
				if _, err := st.Migrate(context.Background()); err != nil {
					t.Fatal(err)
				}
				var toks []httpapi.Token
				if len(tokens) > 0 {
					var err error
					if toks, err = httpapi.ParseTokens(strings.Join(tokens, "\n")); err != nil {
						t.Fatal(err)
					}
				}
				handler, err := httpapi.NewServer(httpapi.Config{Store: st, Tokens: toks})
				if err != nil {
					t.Fatal(err)
				}
				srv := httptest.NewServer(validatingHandler(t, handler, seen))
				t.Cleanup(srv.Close)
				return srv.URL
			})
			// The validation above covers the whole document only if the
			// suite reaches every operation.
			if m := seen.missing(); len(m) > 0 && !t.Failed() && !testing.Short() {
				t.Errorf("the API suite never called %d documented operations: %v", len(m), m)
			}
		})
	}
}

// /metrics still answers when a collector fails (flowd_workflows while the
// database is down): the metric is left out, the rest is served.
func TestMetricsWithAFailingCollector(t *testing.T) {
	st := backends[0].open(t)
	t.Cleanup(func() { st.Close() })
	m := metrics.New()
	m.RegisterWorkflowGauge(func(context.Context) (map[workflow.Status]int64, error) {
		return nil, store.ErrUnavailable
	}, nil)
	handler, err := httpapi.NewServer(httpapi.Config{Store: st, Registry: m.Registry})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest("GET", "http://localhost/metrics", nil))
	body := rec.Body.String()
	if rec.Code != 200 || !strings.Contains(body, "flowd_update_retries_total 0") || !strings.Contains(body, "go_goroutines") || strings.Contains(body, "flowd_workflows{") {
		t.Errorf("/metrics with flowd_workflows failing: %d\n%.1500s", rec.Code, body)
	}
}
