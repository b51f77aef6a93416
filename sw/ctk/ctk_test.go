package ctk

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/httpapi"
	"github.com/flowd/flowd/internal/pgtest"
	"github.com/flowd/flowd/internal/storeopen"
	"github.com/flowd/flowd/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// newHTTPClient returns the client the engine runs `call: http` and
// `call: openapi` with: one whose every host (petstore.swagger.io,
// httpbin.org) is answered by a local stub, so the kit runs without a
// network. stub_test.go sets it.
var newHTTPClient func(t testing.TB) *http.Client

// backend is a store kind; newDB makes a fresh, empty database of it.
type backend struct {
	name  string
	newDB func(t *testing.T) string
}

var backends = []backend{
	{"sqlite", func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "flowd.db") }},
	{"postgres", func(t *testing.T) string { return pgtest.NewDatabase(t) }},
}

// openStore opens (as flowd serve does, by the address's scheme) and
// migrates a store on addr, closed when t ends.
func openStore(t *testing.T, addr string) store.Backend {
	t.Helper()
	st, err := storeopen.Open(t.Context(), addr, storeopen.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return st
}

// newEngine builds the engine of node on st with in-process workers and
// handlers, and starts it; it is stopped when t ends. client runs the http
// calls (nil: the engine's default).
func newEngine(t *testing.T, st store.Backend, node string, client *http.Client, handlers map[string]engine.Handler) *engine.Engine {
	t.Helper()
	workers := 4
	eng, err := engine.New(engine.Config{Store: st, Workers: &workers, HTTPClient: client,
		SweepInterval: 50 * time.Millisecond, PollInterval: 50 * time.Millisecond, NodeID: node})
	if err != nil {
		t.Fatal(err)
	}
	for name, h := range handlers {
		eng.Register(name, h)
	}
	if err := eng.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eng.Stop)
	return eng
}

// TestCTK runs every scenario of the kit, on a fresh database of each store:
// the workflow is PUT as YAML, started with POST /v1/workflows, and watched
// through the API until it finishes.
func TestCTK(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "features", "*.feature"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no feature files under testdata/features (%v)", err)
	}
	var features []*feature
	for _, p := range paths {
		f, err := readFeature(p)
		if err != nil {
			t.Fatal(err)
		}
		features = append(features, f)
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			if newHTTPClient == nil {
				t.Fatal("no http stub: sw/ctk/stub_test.go must set newHTTPClient to a client of the swtest stub")
			}
			for _, f := range features {
				t.Run(f.Name, func(t *testing.T) {
					for _, sc := range f.Scenarios {
						t.Run(sc.Name, func(t *testing.T) {
							st := openStore(t, b.newDB(t))
							client := newHTTPClient(t)
							eng := newEngine(t, st, "ctk", client, nil)
							srv, err := httpapi.NewServer(httpapi.Config{Store: st, Engine: eng})
							if err != nil {
								t.Fatal(err)
							}
							if err := runScenario(t.Context(), f, sc, &api{h: srv}); err != nil {
								t.Fatal(err)
							}
						})
					}
				})
			}
		})
	}
}

// api sends requests to the flowd API handler, in process.
type api struct{ h http.Handler }

// do sends a request and decodes a 2xx answer's JSON into out (when not
// nil); any other status is an error carrying the body.
func (a *api) do(ctx context.Context, method, path, contentType string, body []byte, out any) error {
	req := httptest.NewRequestWithContext(ctx, method, "http://localhost"+path, bytes.NewReader(body))
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	rec := httptest.NewRecorder()
	a.h.ServeHTTP(rec, req)
	res := rec.Result()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %d %s", method, path, res.StatusCode, bytes.TrimSpace(data))
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: decoding %s: %w", method, path, data, err)
		}
	}
	return nil
}
