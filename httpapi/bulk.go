package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
	"github.com/flowd/flowd/workflow/instance"
)

// bulkCountBound bounds how many instances POST /v1/bulk/count counts: a
// confirmation needs "how many", not an exact figure past it.
const bulkCountBound = 10000

func (s *Server) bulkRoutes(mux router) {
	mux.Handle("POST /v1/bulk", s.takes(jsonBody, s.createBulk))
	mux.HandleFunc("GET /v1/bulk", s.listBulk)
	mux.HandleFunc("GET /v1/bulk/count", s.countBulk)
	mux.HandleFunc("GET /v1/bulk/{id}", s.getBulk)
	mux.Handle("POST /v1/bulk/{id}/cancel", s.takes(jsonBody, s.cancelBulk))
}

// createBulk is POST /v1/bulk: 202 with the operation, stored RUNNING; the
// sweepers of every node work it off. 400 names every problem of the body
// (an empty filter among them).
func (s *Server) createBulk(w http.ResponseWriter, r *http.Request) {
	var req api.BulkRequest
	if err := decodeControl(r, &req, false); err != nil {
		s.fail(w, r, err)
		return
	}
	p := engine.BulkParams{Action: req.Action}
	problems := bulkFilterOf(req.Filter, &p.Filter)
	if req.Limit != nil {
		if *req.Limit < 1 || *req.Limit > engine.MaxBulkLimit {
			problems = append(problems, fmt.Sprintf("limit must be from 1 to %d, not %d", engine.MaxBulkLimit, *req.Limit))
		} else {
			p.Limit = *req.Limit
		}
	}
	if len(problems) == 0 {
		problems = p.Problems()
	} else if msg := engine.BulkActionProblem(req.Action); msg != "" {
		// A filter that did not parse is not checked further: the action
		// is.
		problems = append([]string{msg}, problems...)
	}
	if len(problems) > 0 {
		s.fail(w, r, &engine.BulkError{Problems: problems})
		return
	}
	op, err := s.eng.CreateBulk(r.Context(), p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/bulk/"+op.ID)
	writeJSON(w, http.StatusAccepted, bulkView(op))
}

// bulkFilterOf parses f into out and lists its problems: times that are
// not RFC 3339, search values that are not strings, numbers or booleans.
// The rest is checked with the operation (store.BulkFilter.Problems).
func bulkFilterOf(f api.BulkFilter, out *store.BulkFilter) []string {
	var problems []string
	out.Status, out.Definition, out.Parent, out.IDPrefix = workflow.Status(f.Status), f.Definition, f.Parent, f.IDPrefix
	for _, t := range []struct {
		name string
		v    string
		dst  **time.Time
	}{
		{"created_after", f.CreatedAfter, &out.CreatedAfter},
		{"created_before", f.CreatedBefore, &out.CreatedBefore},
		{"updated_before", f.UpdatedBefore, &out.UpdatedBefore},
	} {
		if t.v == "" {
			continue
		}
		// RFC 3339 allows a lowercase "t" and "z"; Go's layout does not.
		at, err := time.Parse(time.RFC3339, strings.ToUpper(t.v))
		if err != nil {
			problems = append(problems, fmt.Sprintf("filter.%s %q is not an RFC 3339 time (e.g. 2026-11-21T10:00:00Z)", t.name, t.v))
			continue
		}
		at = store.Timestamp(at)
		*t.dst = &at
	}
	if len(f.Search) > 0 {
		out.Search = make(map[string]string, len(f.Search))
		for name, raw := range f.Search {
			// Compared as the stored value is: 42.0 is 42.
			text, _, err := instance.SearchText(name, raw)
			if err != nil {
				problems = append(problems, fmt.Sprintf("filter.search.%s: a search value is a string, a number or a boolean (%v)", name, err))
				continue
			}
			out.Search[name] = text
		}
	}
	return problems
}

// bulkView is op as the API shows it.
func bulkView(op *store.BulkOperation) api.BulkOperation {
	v := api.BulkOperation{
		ID: op.ID, Action: op.Action, Limit: op.Limit, Status: op.Status,
		Matched: op.Matched, Done: op.Done, Skipped: op.Skipped, Failed: op.Failed, Errors: []api.BulkError{},
		Actor: op.Actor, CreatedAt: op.CreatedAt, UpdatedAt: op.UpdatedAt, FinishedAt: op.FinishedAt,
	}
	f := op.Filter
	v.Filter = api.BulkFilter{Status: string(f.Status), Definition: f.Definition, Parent: f.Parent, IDPrefix: f.IDPrefix}
	if len(f.Search) > 0 {
		v.Filter.Search = make(map[string]json.RawMessage, len(f.Search))
		for name, text := range f.Search {
			b, _ := json.Marshal(text)
			v.Filter.Search[name] = b
		}
	}
	for _, t := range []struct {
		src *time.Time
		dst *string
	}{{f.CreatedAfter, &v.Filter.CreatedAfter}, {f.CreatedBefore, &v.Filter.CreatedBefore}, {f.UpdatedBefore, &v.Filter.UpdatedBefore}} {
		if t.src != nil {
			*t.dst = t.src.UTC().Format(time.RFC3339Nano)
		}
	}
	for _, e := range op.Errors {
		v.Errors = append(v.Errors, api.BulkError{WorkflowID: e.WorkflowID, Error: e.Error})
	}
	return v
}

// getBulk is GET /v1/bulk/{id}: 200, or 404.
func (s *Server) getBulk(w http.ResponseWriter, r *http.Request) {
	op, err := s.eng.GetBulk(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, bulkView(op))
}

// listBulk is GET /v1/bulk: the most recent operations, newest first;
// ?status= keeps one status, ?limit= (1–1000, default 50).
func (s *Server) listBulk(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := store.ListBulkParams{Status: q.Get("status")}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > store.MaxBulkListLimit {
			s.fail(w, r, httpError(http.StatusBadRequest, fmt.Sprintf("limit must be an integer from 1 to %d, not %q", store.MaxBulkListLimit, v)))
			return
		}
		p.Limit = n
	}
	if p.Status != "" && p.Status != store.BulkRunning && p.Status != store.BulkDone && p.Status != store.BulkCancelled {
		s.fail(w, r, httpError(http.StatusBadRequest, fmt.Sprintf("status must be RUNNING, DONE or CANCELLED, not %q", p.Status)))
		return
	}
	ops, err := s.eng.ListBulk(r.Context(), p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := api.ListBulkResponse{Operations: []api.BulkOperation{}}
	for _, op := range ops {
		out.Operations = append(out.Operations, bulkView(op))
	}
	writeJSON(w, http.StatusOK, out)
}

// cancelBulk is POST /v1/bulk/{id}/cancel: 200 with the operation
// CANCELLED (its worker stops after the batch in flight; a CANCELLED one
// is returned as it is), 409 for a DONE one, 404.
func (s *Server) cancelBulk(w http.ResponseWriter, r *http.Request) {
	var empty struct{}
	if err := decodeControl(r, &empty, true); err != nil {
		s.fail(w, r, err)
		return
	}
	op, err := s.eng.CancelBulk(r.Context(), r.PathValue("id"))
	if errors.Is(err, engine.ErrBulkFinished) {
		err = httpError(http.StatusConflict, err.Error()+": it acted on every match; nothing is left to cancel")
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, bulkView(op))
}

// countBulk is GET /v1/bulk/count: how many instances a filter matches
// now (what a bulk operation with it would find, were it created now),
// counted up to bulkCountBound. The filter is in the query, as GET
// /v1/workflows takes it: status, definition, parent, id_prefix,
// search.NAME=VALUE, created_after, created_before, updated_before. 400 as
// POST /v1/bulk for the filter (an empty one included).
func (s *Server) countBulk(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	req := api.BulkFilter{Status: q.Get("status"), Definition: q.Get("definition"), Parent: q.Get("parent"), IDPrefix: q.Get("id_prefix"),
		CreatedAfter: q.Get("created_after"), CreatedBefore: q.Get("created_before"), UpdatedBefore: q.Get("updated_before")}
	var f store.BulkFilter
	problems := bulkFilterOf(req, &f)
	search, err := searchParams(q)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	f.Search = search
	if len(problems) == 0 {
		problems = f.Problems()
	}
	if len(problems) > 0 {
		s.fail(w, r, &engine.BulkError{Problems: problems})
		return
	}
	p := f.ListParams(time.Time{})
	p.Limit = store.MaxListLimit
	count := 0
	for count < bulkCountBound {
		page, err := s.cfg.Store.List(r.Context(), p)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		count += len(page.Instances)
		if page.NextCursor == "" {
			writeJSON(w, http.StatusOK, api.BulkCount{Count: count, Exact: true})
			return
		}
		p.Cursor = page.NextCursor
	}
	writeJSON(w, http.StatusOK, api.BulkCount{Count: count, Exact: false})
}
