package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/httpapi"
)

// A bulk operation is worked off by the server's engine: it ends DONE
// with its counts, the matches changed and nothing else; a DONE one
// cannot be cancelled (409).
func TestBulkWorkedOff(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			st := b.open(t)
			t.Cleanup(func() { st.Close() })
			if _, err := st.Migrate(context.Background()); err != nil {
				t.Fatal(err)
			}
			none := 0
			eng, err := engine.New(engine.Config{Store: st, Workers: &none, SweepInterval: 50 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if err := eng.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(eng.Stop)
			h, err := httpapi.NewServer(httpapi.Config{Store: st, Engine: eng})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)
			call := func(method, path, body string, want int) []byte {
				t.Helper()
				req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				var out json.RawMessage
				_ = json.NewDecoder(resp.Body).Decode(&out)
				if resp.StatusCode != want {
					t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, out, want)
				}
				return out
			}
			call("PUT", "/v1/definitions/job", `{"name": "job", "steps": [{"id": "a", "type": "wait"}]}`, 201)
			for i := range 12 {
				call("POST", "/v1/workflows", fmt.Sprintf(`{"id": "job-%02d", "definition": "job"}`, i), 201)
			}
			call("POST", "/v1/workflows", `{"id": "free"}`, 201)
			var op api.BulkOperation
			_ = json.Unmarshal(call("POST", "/v1/bulk", `{"action": "cancel", "filter": {"definition": "job", "id_prefix": "job-0"}}`, 202), &op)
			deadline := time.Now().Add(10 * time.Second)
			for op.Status == "RUNNING" {
				if time.Now().After(deadline) {
					t.Fatalf("still RUNNING after 10s: %+v", op)
				}
				time.Sleep(20 * time.Millisecond)
				_ = json.Unmarshal(call("GET", "/v1/bulk/"+op.ID, "", 200), &op)
			}
			if op.Status != "DONE" || op.Matched != 10 || op.Done != 10 || op.Skipped != 0 || op.Failed != 0 || op.FinishedAt == nil {
				t.Errorf("finished: %+v; want DONE, 10 matched and done", op)
			}
			for i := range 12 {
				var inst struct{ Status string }
				_ = json.Unmarshal(call("GET", fmt.Sprintf("/v1/workflows/job-%02d", i), "", 200), &inst)
				if want := map[bool]string{true: "CANCELLED", false: "RUNNING"}[i < 10]; inst.Status != want {
					t.Errorf("job-%02d is %s, want %s", i, inst.Status, want)
				}
			}
			body := call("POST", "/v1/bulk/"+op.ID+"/cancel", "", 409)
			if !strings.Contains(string(body), "is DONE") {
				t.Errorf("cancel of a DONE one: %s", body)
			}
			var count api.BulkCount
			_ = json.Unmarshal(call("GET", "/v1/bulk/count?definition=job&status=CANCELLED", "", 200), &count)
			if count.Count != 10 || !count.Exact {
				t.Errorf("count after: %+v", count)
			}
		})
	}
}
