package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/flowd/flowd/httpapi"
	"github.com/flowd/flowd/metrics"
	"github.com/flowd/flowd/store/observed"
	"github.com/flowd/flowd/store/sqlite"
)

// Out of disk: a write answers 507 with the JSON error body and nothing is
// written; /healthz answers 503 from then until a write succeeds again.
// SQLite's max_page_count, lowered on the write connection, makes it report
// SQLITE_FULL exactly as a full disk does.
func TestStorageFull(t *testing.T) {
	ctx := context.Background()
	base, err := sqlite.Open(ctx, "sqlite:"+t.TempDir()+"/full.db", sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { base.Close() })
	if _, err := base.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	m := metrics.New()
	handler, err := httpapi.NewServer(httpapi.Config{Store: observed.Wrap(base, nil, m), Registry: m.Registry})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	do := func(method, path, body string) (int, httpapi.ErrorBody) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("If-Match", "*")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var e httpapi.ErrorBody
		if res.StatusCode >= 400 {
			if ct := res.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("%s %s: %d with Content-Type %q", method, path, res.StatusCode, ct)
			}
			if err := json.NewDecoder(res.Body).Decode(&e); err != nil || e.Error != http.StatusText(res.StatusCode) || e.Message == "" {
				t.Errorf("%s %s: %d with error body %+v (%v)", method, path, res.StatusCode, e, err)
			}
		}
		return res.StatusCode, e
	}
	big := `{"variables":{"blob":"` + strings.Repeat("x", 256<<10) + `"}}`
	if code, _ := do("POST", "/v1/workflows", `{"id":"disk"}`); code != 201 {
		t.Fatalf("create: %d", code)
	}
	if code, _ := do("GET", "/healthz", ""); code != 200 {
		t.Fatalf("healthz before: %d", code)
	}
	if _, err := base.SetMaxPageCount(ctx, 1); err != nil { // clamped to the current size
		t.Fatal(err)
	}
	code, e := do("PATCH", "/v1/workflows/disk", big)
	if code != 507 || !strings.Contains(e.Message, "out of storage space") {
		t.Fatalf("PATCH with the disk full: %d %+v, want 507", code, e)
	}
	if code, _ := do("POST", "/v1/workflows", `{"id":"disk-2","state":`+big+`}`); code != 507 {
		t.Fatalf("create with the disk full: %d, want 507", code)
	}
	code, e = do("GET", "/healthz", "")
	if code != 503 || !strings.Contains(e.Message, "out of storage space") {
		t.Fatalf("healthz with the disk full: %d %+v, want 503", code, e)
	}
	if code, _ := do("GET", "/v1/workflows/disk-2", ""); code != 404 {
		t.Errorf("the refused create was written: GET %d", code)
	}
	// Reads still work; space comes back; the next write succeeds and so
	// does /healthz.
	if code, _ := do("GET", "/v1/workflows/disk", ""); code != 200 {
		t.Fatalf("read with the disk full: %d", code)
	}
	if _, err := base.SetMaxPageCount(ctx, 1<<30); err != nil {
		t.Fatal(err)
	}
	if code, _ := do("GET", "/healthz", ""); code != 503 {
		t.Fatalf("healthz before any write succeeded: %d, want 503", code)
	}
	if code, _ := do("PATCH", "/v1/workflows/disk", big); code != 200 {
		t.Fatalf("PATCH with space again: %d", code)
	}
	if code, _ := do("GET", "/healthz", ""); code != 200 {
		t.Fatalf("healthz after a write succeeded: %d, want 200", code)
	}
}
