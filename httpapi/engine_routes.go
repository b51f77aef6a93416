package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/engine"
)

// maxPollWait bounds wait_seconds of a long poll.
const maxPollWait = 60 * time.Second

func (s *Server) putDefinition(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// A definition is YAML or JSON; the JSON form (an object or array, as
	// YAML flow style rarely starts) passes the guard of every JSON body.
	if t := bytes.TrimSpace(bytes.TrimPrefix(body, []byte("\xef\xbb\xbf"))); len(t) > 0 && (t[0] == '{' || t[0] == '[') {
		if err := checkJSON(body); err != nil {
			s.fail(w, r, httpError(http.StatusBadRequest, "invalid JSON body: "+err.Error()))
			return
		}
	}
	info, created, err := s.eng.PutDefinitionAs(r.Context(), r.PathValue("name"), body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", "/v1/definitions/"+info.Name)
	}
	writeJSON(w, status, DefinitionResponse{Name: info.Name, Revision: info.Revision})
}

func (s *Server) listDefinitions(w http.ResponseWriter, r *http.Request) {
	defs, err := s.eng.ListDefinitions(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := ListDefinitionsResponse{Definitions: make([]*api.DefinitionInfo, 0, len(defs))}
	for _, d := range defs {
		info, err := apiDefinition(d)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		out.Definitions = append(out.Definitions, info)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getDefinition(w http.ResponseWriter, r *http.Request) {
	rev := 0
	if v := r.URL.Query().Get("revision"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			s.fail(w, r, httpError(http.StatusBadRequest, fmt.Sprintf("revision must be a positive integer, not %q", v)))
			return
		}
		rev = n
	}
	d, err := s.eng.GetDefinition(r.Context(), r.PathValue("name"), rev)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	info, err := apiDefinition(d)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}

// apiDefinition is a revision as the API shows it: the definition in its
// stored form.
func apiDefinition(d *engine.DefinitionInfo) (*api.DefinitionInfo, error) {
	raw, err := json.Marshal(d.Definition)
	if err != nil {
		return nil, fmt.Errorf("encoding definition %s revision %d: %w", d.Name, d.Revision, err)
	}
	return &api.DefinitionInfo{Name: d.Name, Revision: d.Revision, CreatedAt: d.CreatedAt, Definition: raw}, nil
}

func seconds(name string, v *float64, max time.Duration) (time.Duration, error) {
	if v == nil {
		return 0, nil
	}
	// Compared before converting: a huge value would overflow the Duration.
	if *v < 0 || *v > max.Seconds() {
		return 0, httpError(http.StatusBadRequest, fmt.Sprintf("%s must be from 0 to %d", name, int(max/time.Second)))
	}
	return time.Duration(*v * float64(time.Second)), nil
}

func (s *Server) pollTask(w http.ResponseWriter, r *http.Request) {
	var req PollRequest
	if err := decodeControl(r, &req, false); err != nil {
		s.fail(w, r, err)
		return
	}
	lease, err := seconds("lease_seconds", req.LeaseSeconds, time.Hour)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	wait, err := seconds("wait_seconds", req.WaitSeconds, maxPollWait)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if req.LeaseSeconds != nil && lease < time.Second {
		s.fail(w, r, httpError(http.StatusBadRequest, "lease_seconds must be at least 1"))
		return
	}
	t, err := s.eng.Poll(r.Context(), engine.PollParams{Worker: req.Worker, Handlers: req.Handlers, Lease: lease, Wait: wait})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if t == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	writeJSON(w, http.StatusOK, TaskResponse{
		TaskID: t.ID, Lease: t.Lease, LeaseUntil: t.LeaseUntil, WorkflowID: t.WorkflowID, Step: t.Step,
		Handler: t.Handler, Attempt: t.Attempt, Index: t.Index, Input: t.Input, IdempotencyKey: t.IdempotencyKey,
		TraceParent: t.TraceParent, Kind: t.Kind, Journal: t.Journal,
	})
}

// decodeLeased decodes a lease holder's body (complete, fail, heartbeat)
// strictly into v and requires its lease, which lease points to.
func decodeLeased(r *http.Request, v any, lease *string) error {
	if err := decodeControl(r, v, false); err != nil {
		return err
	}
	if strings.TrimSpace(*lease) == "" {
		return httpError(http.StatusBadRequest, `"lease" is required: the lease returned by /v1/tasks/poll`)
	}
	return nil
}

func (s *Server) completeTask(w http.ResponseWriter, r *http.Request) {
	var req CompleteTaskRequest
	if err := decodeLeased(r, &req, &req.Lease); err != nil {
		s.fail(w, r, err)
		return
	}
	id := r.PathValue("task_id")
	if err := s.eng.CompleteTask(r.Context(), id, req.Lease, req.Output); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, TaskResultResponse{TaskID: id, Status: "completed"})
}

func (s *Server) failTask(w http.ResponseWriter, r *http.Request) {
	var req FailTaskRequest
	if err := decodeLeased(r, &req, &req.Lease); err != nil {
		s.fail(w, r, err)
		return
	}
	retryable := req.Retryable == nil || *req.Retryable
	id := r.PathValue("task_id")
	if err := s.eng.FailTask(r.Context(), id, req.Lease, req.Error, retryable); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, TaskResultResponse{TaskID: id, Status: "failed"})
}

func (s *Server) heartbeatTask(w http.ResponseWriter, r *http.Request) {
	var req HeartbeatRequest
	if err := decodeLeased(r, &req, &req.Lease); err != nil {
		s.fail(w, r, err)
		return
	}
	d, err := seconds("lease_seconds", req.LeaseSeconds, time.Hour)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	id := r.PathValue("task_id")
	until, err := s.eng.Heartbeat(r.Context(), id, req.Lease, d)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, HeartbeatResponse{TaskID: id, LeaseUntil: until})
}
