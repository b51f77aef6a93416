package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/httpapi"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/store/sqlite"
)

// newHandler is the API over st, migrated here, with an engine (without
// workers) whose state limit is maxState (0: the default).
func newHandler(t testing.TB, st store.Backend, maxState int) http.Handler {
	t.Helper()
	t.Cleanup(func() { st.Close() })
	if _, err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	none := 0
	eng, err := engine.New(engine.Config{Store: st, Workers: &none, MaxStateBytes: maxState})
	if err != nil {
		t.Fatal(err)
	}
	h, err := httpapi.NewServer(httpapi.Config{Store: st, Engine: eng})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func serve(h http.Handler, method, path, body string, headers ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Host = "localhost" // httptest's example.com is not a name of the server (421)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// BenchmarkPatch10kKeys is one PATCH of 10,000 variables through the
// handler on SQLite.
func BenchmarkPatch10kKeys(b *testing.B) {
	st, err := sqlite.Open(context.Background(), "sqlite:"+b.TempDir()+"/flowd.db", sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	h := newHandler(b, st, 0)
	body := httpapi.VariablesPatch(10_000)
	for i := 0; b.Loop(); i++ {
		id := fmt.Sprintf("bench-%d", i)
		b.StopTimer()
		serve(h, "POST", "/v1/workflows", `{"id":"`+id+`"}`)
		b.StartTimer()
		if rec := serve(h, "PATCH", "/v1/workflows/"+id, body, "If-Match", `"0"`); rec.Code != 200 {
			b.Fatalf("patch: %d", rec.Code)
		}
	}
}

// A PATCH nested 5,000 levels deep is refused (400) by the guard before
// anything decodes it: it allocates little.
func TestDeepPatchIsRefusedCheaply(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			h := newHandler(t, b.open(t), 0)
			serve(h, "POST", "/v1/workflows", `{"id":"deep"}`)
			body := `{"x":` + strings.Repeat(`{"a":`, 5000) + `1` + strings.Repeat(`}`, 5000) + `}`
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			rec := serve(h, "PATCH", "/v1/workflows/deep", body, "If-Match", `"0"`)
			runtime.ReadMemStats(&after)
			if rec.Code != 400 || !strings.Contains(rec.Body.String(), "nested deeper than 64 levels at byte") {
				t.Fatalf("PATCH 5,000 levels deep: %d %s", rec.Code, rec.Body)
			}
			if d := after.TotalAlloc - before.TotalAlloc; d > 16<<20 {
				t.Errorf("refusing a 5,000-level PATCH allocated %d bytes", d)
			}
			if rec := serve(h, "GET", "/v1/workflows/deep", ""); rec.Header().Get("ETag") != `"0"` {
				t.Errorf("the refused patch changed the instance: ETag %s", rec.Header().Get("ETag"))
			}
		})
	}
}

// Numbers a float64 cannot hold are refused (400) at the boundary, naming
// where they are, in every body: a start with 2,000 of them (18 KB; an
// integer input schema spent 41 s of CPU on them), a patch, an event.
func TestHugeNumbersAreRefused(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			h := newHandler(t, b.open(t), 0)
			serve(h, "POST", "/v1/workflows", `{"id":"n"}`)
			start := `{"id":"big","input":{"xs":[` + strings.Repeat("1e999999,", 1999) + `1e999999]}}`
			for _, c := range []struct{ method, path, body, want string }{
				{"POST", "/v1/workflows", start, "the number 1e999999 at /input/xs/0 is out of range (a float64 cannot hold its magnitude) at byte 27"},
				{"PATCH", "/v1/workflows/n", `{"variables":{"v":-1e400}}`, "the number -1e400 at /variables/v is out of range"},
				{"POST", "/v1/events", `{"name":"e","data":{"n":[1,2,1e-999]}}`, "the number 1e-999 at /data/n/2 is out of range"},
			} {
				rec := serve(h, c.method, c.path, c.body, "If-Match", "*")
				if rec.Code != 400 || !strings.Contains(rec.Body.String(), c.want) {
					t.Errorf("%s %s: %d %s, want 400 with %q", c.method, c.path, rec.Code, rec.Body, c.want)
				}
			}
			if rec := serve(h, "GET", "/v1/workflows/big", ""); rec.Code != 404 {
				t.Errorf("the refused start created the instance: %d", rec.Code)
			}
		})
	}
}

// With a small --max-state-bytes every change that would pass it is a 413
// that writes nothing: a free-form create, a start with a definition, a
// merge patch, a step completed from outside.
func TestStateLimitOnEveryWrite(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			const limit = 2000
			h := newHandler(t, b.open(t), limit)
			big := `"` + strings.Repeat("x", limit) + `"`
			is413 := func(rec *httptest.ResponseRecorder, what string) {
				t.Helper()
				if rec.Code != 413 || rec.Header().Get("Content-Type") != "application/json" ||
					!strings.Contains(rec.Body.String(), "more than the limit of 2000 bytes (--max-state-bytes); nothing was written") {
					t.Errorf("%s: %d %s %s; want 413 naming the limit", what, rec.Code, rec.Header().Get("Content-Type"), rec.Body)
				}
			}
			is413(serve(h, "POST", "/v1/workflows", `{"id":"c1","state":{"variables":{"v":`+big+`}}}`), "free-form create")
			if rec := serve(h, "GET", "/v1/workflows/c1", ""); rec.Code != 404 {
				t.Errorf("a refused create stored the instance: %d", rec.Code)
			}
			if rec := serve(h, "PUT", "/v1/definitions/d", `{"name":"d","steps":[{"id":"w","type":"wait"}]}`); rec.Code != 201 {
				t.Fatalf("definition: %d %s", rec.Code, rec.Body)
			}
			is413(serve(h, "POST", "/v1/workflows", `{"id":"c2","definition":"d","state":{"note":`+big+`}}`), "start with a definition")
			if rec := serve(h, "GET", "/v1/workflows/c2", ""); rec.Code != 404 {
				t.Errorf("a refused start stored the instance: %d", rec.Code)
			}

			// A state at the limit exactly is accepted.
			serve(h, "POST", "/v1/workflows", `{"id":"p1","state":{"steps":{"s":{"status":"WAITING"}}}}`)
			is413(serve(h, "PATCH", "/v1/workflows/p1", `{"v":`+big+`}`, "If-Match", `"0"`), "patch")
			is413(serve(h, "POST", "/v1/workflows/p1/steps/s/complete", `{"output":`+big+`}`, "If-Match", `"0"`), "step completion")
			rec := serve(h, "GET", "/v1/workflows/p1", "")
			if rec.Header().Get("ETag") != `"0"` {
				t.Errorf("refused changes wrote a version: ETag %s", rec.Header().Get("ETag"))
			}
			stored := len(`{"steps":{"s":{"attempts":0,"status":"WAITING"}},"variables":{},"v":""}`)
			exact := `{"v":"` + strings.Repeat("y", limit-stored) + `"}`
			if rec := serve(h, "PATCH", "/v1/workflows/p1", exact, "If-Match", `"0"`); rec.Code != 200 {
				t.Errorf("a patch to a state of exactly the limit: %d %s", rec.Code, rec.Body)
			}
			is413(serve(h, "PATCH", "/v1/workflows/p1", `{"w":1}`, "If-Match", `"1"`), "one key past the limit")
		})
	}
}
