package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/flowd/flowd/httpapi"
	"github.com/flowd/flowd/store/sqlite"
)

// POST /v1/events lists, in "failed", the waiting steps an event could not
// be delivered to (their state would pass the limit with its data), each
// with the error it failed with; the step's workflow is FAILED. The
// existing fields keep their meaning, and "failed" is [] when none failed.
func TestPublishEventListsTheStepsItFailed(t *testing.T) {
	st, err := sqlite.Open(t.Context(), "sqlite:"+t.TempDir()+"/flowd.db", sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Every answer is checked against openapi.yaml too.
	h := validatingHandler(t, newHandler(t, st, 1000), nil)
	if rec := serve(h, "PUT", "/v1/definitions/pay", "name: pay\nsteps:\n  - {id: paid, type: wait, event: payment, key: \"{{ .input.order }}\"}\n"); rec.Code != 201 {
		t.Fatalf("PUT: %d %s", rec.Code, rec.Body)
	}
	if rec := serve(h, "POST", "/v1/workflows", `{"id":"w1","definition":"pay","input":{"order":"o-1"}}`); rec.Code != 201 {
		t.Fatalf("start: %d %s", rec.Code, rec.Body)
	}
	rec := serve(h, "POST", "/v1/events", `{"name":"payment","key":"o-1","data":"`+strings.Repeat("d", 1200)+`"}`)
	if rec.Code != 202 {
		t.Fatalf("publish: %d %s", rec.Code, rec.Body)
	}
	var out httpapi.PublishEventResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if out.ID == "" || out.Delivered == nil || len(out.Delivered) != 0 || len(out.Failed) != 1 {
		t.Fatalf("publish answered %s", rec.Body)
	}
	f := out.Failed[0]
	if f.WorkflowID != "w1" || f.Step != "paid" || !strings.Contains(f.Error, "more than --max-state-bytes (1000)") {
		t.Errorf("failed %+v", f)
	}
	for _, field := range []string{`"workflow_id":"w1"`, `"step":"paid"`, `"error":"event \"payment\"`} {
		if !strings.Contains(rec.Body.String(), field) {
			t.Errorf("the answer %s lacks %s", rec.Body, field)
		}
	}
	get := serve(h, "GET", "/v1/workflows/w1", "")
	var inst struct {
		Status string
		State  struct {
			Steps map[string]struct{ Status, Error string }
		}
	}
	if err := json.Unmarshal(get.Body.Bytes(), &inst); err != nil {
		t.Fatal(err)
	}
	if inst.Status != "FAILED" || inst.State.Steps["paid"].Status != "FAILED" || inst.State.Steps["paid"].Error != f.Error {
		t.Errorf("w1 after the event: %s", get.Body)
	}
	rec = serve(h, "POST", "/v1/events", `{"name":"payment","key":"o-1"}`)
	if rec.Code != 202 || !strings.Contains(rec.Body.String(), `"delivered":[]`) || !strings.Contains(rec.Body.String(), `"failed":[]`) {
		t.Errorf("a publish nobody takes: %d %s", rec.Code, rec.Body)
	}
}
