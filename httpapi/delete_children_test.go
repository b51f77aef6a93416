package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/flowd/flowd/httpapi"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// DELETE of a finished parent: 409 naming a child that has not finished,
// with nothing deleted; 204 once it has, and the child is gone with it.
func TestDeleteWorkflowWithChildren(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st := b.open(t)
			t.Cleanup(func() { st.Close() })
			if _, err := st.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			handler, err := httpapi.NewServer(httpapi.Config{Store: st})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(handler)
			t.Cleanup(srv.Close)
			do := func(method, path, body string) (int, string) {
				t.Helper()
				req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("If-Match", "*")
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer res.Body.Close()
				b, _ := io.ReadAll(res.Body)
				return res.StatusCode, string(b)
			}
			for _, p := range []store.CreateParams{
				{ID: "parent", Status: workflow.StatusRunning},
				{ID: "kid", Status: workflow.StatusRunning, Parent: &workflow.ParentRef{WorkflowID: "parent", Step: "s"}},
			} {
				if _, err := st.Create(ctx, p); err != nil {
					t.Fatal(err)
				}
			}
			if code, body := do("POST", "/v1/workflows/parent/status", `{"from": "RUNNING", "to": "FAILED"}`); code != 200 {
				t.Fatalf("failing the parent: %d %s", code, body)
			}
			code, body := do("DELETE", "/v1/workflows/parent", "")
			if code != http.StatusConflict || !strings.Contains(body, `child workflow \"kid\" that is RUNNING`) {
				t.Errorf("DELETE of a parent with a RUNNING child: %d %s; want 409 naming it", code, body)
			}
			for _, id := range []string{"parent", "kid"} {
				if code, body := do("GET", "/v1/workflows/"+id, ""); code != 200 {
					t.Errorf("%s after the refused delete: %d %s", id, code, body)
				}
			}
			if code, body := do("POST", "/v1/workflows/kid/cancel", ""); code != 200 {
				t.Fatalf("cancelling the child: %d %s", code, body)
			}
			if code, body := do("DELETE", "/v1/workflows/parent", ""); code != http.StatusNoContent {
				t.Fatalf("DELETE of a parent whose child finished: %d %s", code, body)
			}
			for _, id := range []string{"parent", "kid"} {
				if code, body := do("GET", "/v1/workflows/"+id, ""); code != 404 {
					t.Errorf("%s after the delete: %d %s, want 404", id, code, body)
				}
			}
		})
	}
}
