package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// PutScheduleRequest is the body of PUT /v1/schedules/{name}.
type PutScheduleRequest struct {
	Definition string          `json:"definition"`
	Cron       string          `json:"cron"`
	Timezone   string          `json:"timezone,omitempty"`
	Input      json.RawMessage `json:"input,omitempty"`
	Overlap    string          `json:"overlap,omitempty"`
	Paused     bool            `json:"paused,omitempty"`
	// CatchupWindow is a Go duration ("1m", the default, "90s", "2h").
	CatchupWindow string `json:"catchup_window,omitempty"`
}

// Schedule is a schedule as the API shows it. NextFireTimes are the next
// fire times after now, in UTC (RFC 3339), shown for a paused schedule too
// (when it would fire once resumed).
type Schedule struct {
	Name           string          `json:"name"`
	Definition     string          `json:"definition"`
	Cron           string          `json:"cron"`
	Timezone       string          `json:"timezone"`
	Input          json.RawMessage `json:"input"`
	Overlap        string          `json:"overlap"`
	Paused         bool            `json:"paused"`
	CatchupWindow  string          `json:"catchup_window"`
	NextFireTimes  []time.Time     `json:"next_fire_times"`
	LastFireAt     *time.Time      `json:"last_fire_at,omitempty"`
	LastInstanceID string          `json:"last_instance_id,omitempty"`
	BufferedFireAt *time.Time      `json:"buffered_fire_at,omitempty"`
	CreatedAt      time.Time       `json:"created_at"`
	UpdatedAt      time.Time       `json:"updated_at"`
}

// ListSchedulesResponse is the body of GET /v1/schedules.
type ListSchedulesResponse struct {
	Schedules []Schedule `json:"schedules"`
}

// BackfillRequest is the body of POST /v1/schedules/{name}/backfill.
type BackfillRequest struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// BackfillResponse answers a backfill: the ids it created and those that
// existed already, by fire time.
type BackfillResponse = engine.BackfillResult

// nextFireTimesShown is how many fire times a schedule shows.
const nextFireTimesShown = 5

func (s *Server) scheduleRoutes(mux router) {
	mux.Handle("PUT /v1/schedules/{name}", s.takes(jsonBody, s.putSchedule))
	mux.HandleFunc("GET /v1/schedules", s.listSchedules)
	mux.HandleFunc("GET /v1/schedules/{name}", s.getSchedule)
	mux.HandleFunc("DELETE /v1/schedules/{name}", s.deleteSchedule)
	mux.Handle("POST /v1/schedules/{name}/pause", s.takes(jsonBody, s.pauseSchedule(true)))
	mux.Handle("POST /v1/schedules/{name}/resume", s.takes(jsonBody, s.pauseSchedule(false)))
	mux.Handle("POST /v1/schedules/{name}/trigger", s.takes(jsonBody, s.triggerSchedule))
	mux.Handle("POST /v1/schedules/{name}/backfill", s.takes(jsonBody, s.backfillSchedule))
}

func (s *Server) scheduleView(sc *store.Schedule) (Schedule, error) {
	next, err := s.eng.NextFireTimes(sc, nextFireTimesShown)
	if err != nil {
		return Schedule{}, err
	}
	return Schedule{Name: sc.Name, Definition: sc.Definition, Cron: sc.Cron, Timezone: sc.Timezone, Input: sc.Input,
		Overlap: sc.Overlap, Paused: sc.Paused, CatchupWindow: sc.CatchupWindow.String(), NextFireTimes: next,
		LastFireAt: sc.LastFireAt, LastInstanceID: sc.LastInstanceID, BufferedFireAt: sc.BufferedFireAt,
		CreatedAt: sc.CreatedAt, UpdatedAt: sc.UpdatedAt}, nil
}

func (s *Server) writeSchedule(w http.ResponseWriter, r *http.Request, status int, sc *store.Schedule) {
	view, err := s.scheduleView(sc)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, status, view)
}

// putSchedule is PUT /v1/schedules/{name}: 201 created, 200 replaced.
func (s *Server) putSchedule(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := store.ValidateScheduleName(name); err != nil {
		s.fail(w, r, err)
		return
	}
	var req PutScheduleRequest
	if err := decodeControl(r, &req, false); err != nil {
		s.fail(w, r, err)
		return
	}
	sc := store.Schedule{Name: name, Definition: req.Definition, Cron: req.Cron, Timezone: req.Timezone,
		Input: req.Input, Overlap: req.Overlap, Paused: req.Paused}
	if req.CatchupWindow != "" {
		d, err := time.ParseDuration(req.CatchupWindow)
		if err != nil || d <= 0 {
			s.fail(w, r, httpError(http.StatusBadRequest, fmt.Sprintf("catchup_window %q is not a positive Go duration such as 1m or 90s", req.CatchupWindow)))
			return
		}
		sc.CatchupWindow = d
	}
	out, created, err := s.eng.PutSchedule(r.Context(), sc)
	if errors.Is(err, store.ErrNotFound) {
		// The schedule is being created: what is missing is its definition.
		err = httpError(http.StatusNotFound, fmt.Sprintf("definition %q not found: store it first (PUT /v1/definitions/%s)", req.Definition, req.Definition))
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", "/v1/schedules/"+name)
	}
	s.writeSchedule(w, r, status, out)
}

func (s *Server) listSchedules(w http.ResponseWriter, r *http.Request) {
	list, err := s.eng.ListSchedules(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := ListSchedulesResponse{Schedules: make([]Schedule, 0, len(list))}
	for _, sc := range list {
		view, err := s.scheduleView(sc)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		out.Schedules = append(out.Schedules, view)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getSchedule(w http.ResponseWriter, r *http.Request) {
	sc, err := s.eng.GetSchedule(r.Context(), r.PathValue("name"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeSchedule(w, r, http.StatusOK, sc)
}

// deleteSchedule is DELETE /v1/schedules/{name}: 204; the instances it
// started stay.
func (s *Server) deleteSchedule(w http.ResponseWriter, r *http.Request) {
	if err := s.eng.DeleteSchedule(r.Context(), r.PathValue("name")); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) pauseSchedule(paused bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := decodeControl(r, &struct{}{}, true); err != nil {
			s.fail(w, r, err)
			return
		}
		sc, err := s.eng.SetSchedulePaused(r.Context(), r.PathValue("name"), paused)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		s.writeSchedule(w, r, http.StatusOK, sc)
	}
}

// triggerSchedule is POST /v1/schedules/{name}/trigger: 201 with the
// instance started now; 409 when one was started this second already.
func (s *Server) triggerSchedule(w http.ResponseWriter, r *http.Request) {
	if err := decodeControl(r, &struct{}{}, true); err != nil {
		s.fail(w, r, err)
		return
	}
	inst, err := s.eng.TriggerSchedule(r.Context(), r.PathValue("name"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeCreated(w, http.StatusCreated, inst)
}

func (s *Server) backfillSchedule(w http.ResponseWriter, r *http.Request) {
	var req BackfillRequest
	if err := decodeControl(r, &req, false); err != nil {
		s.fail(w, r, err)
		return
	}
	from, err := time.Parse(time.RFC3339, req.From)
	if err != nil {
		s.fail(w, r, httpError(http.StatusBadRequest, fmt.Sprintf("from %q is not an RFC 3339 time such as 2026-11-25T04:00:00Z", req.From)))
		return
	}
	to, err := time.Parse(time.RFC3339, req.To)
	if err != nil {
		s.fail(w, r, httpError(http.StatusBadRequest, fmt.Sprintf("to %q is not an RFC 3339 time such as 2026-11-25T04:00:00Z", req.To)))
		return
	}
	res, err := s.eng.BackfillSchedule(r.Context(), r.PathValue("name"), from, to)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func schedulePath(name string) string { return "/v1/schedules/" + pathSegment(name) }

// PutSchedule creates (true) or replaces (false) the schedule name.
func (c *Client) PutSchedule(ctx context.Context, name string, req PutScheduleRequest) (*Schedule, bool, error) {
	if name == "" {
		return nil, false, errors.New("flowd client: PutSchedule: the schedule name is empty")
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, false, fmt.Errorf("flowd client: encoding schedule: %w", err)
	}
	var out Schedule
	status, _, err := c.send(ctx, c.http, http.MethodPut, schedulePath(name), nil, body, "application/json", &out)
	if err != nil {
		return nil, false, err
	}
	return &out, status == http.StatusCreated, nil
}

// ListSchedules returns every schedule by name.
func (c *Client) ListSchedules(ctx context.Context) ([]Schedule, error) {
	var out ListSchedulesResponse
	if _, err := c.do(ctx, http.MethodGet, "/v1/schedules", nil, nil, "", &out); err != nil {
		return nil, err
	}
	if out.Schedules == nil {
		out.Schedules = []Schedule{}
	}
	return out.Schedules, nil
}

// GetSchedule returns the schedule name with its next fire times.
func (c *Client) GetSchedule(ctx context.Context, name string) (*Schedule, error) {
	if name == "" {
		return nil, errors.New("flowd client: GetSchedule: the schedule name is empty")
	}
	var out Schedule
	if _, err := c.do(ctx, http.MethodGet, schedulePath(name), nil, nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteSchedule deletes the schedule name (not its instances).
func (c *Client) DeleteSchedule(ctx context.Context, name string) error {
	if name == "" {
		return errors.New("flowd client: DeleteSchedule: the schedule name is empty")
	}
	_, err := c.do(ctx, http.MethodDelete, schedulePath(name), nil, nil, "", nil)
	return err
}

// PauseSchedule pauses (or, with paused false, resumes) the schedule name.
func (c *Client) PauseSchedule(ctx context.Context, name string, paused bool) (*Schedule, error) {
	if name == "" {
		return nil, errors.New("flowd client: PauseSchedule: the schedule name is empty")
	}
	action := "/pause"
	if !paused {
		action = "/resume"
	}
	var out Schedule
	if _, err := c.do(ctx, http.MethodPost, schedulePath(name)+action, nil, []byte(`{}`), "application/json", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// TriggerSchedule starts an instance of the schedule name now.
func (c *Client) TriggerSchedule(ctx context.Context, name string) (*workflow.Instance, error) {
	if name == "" {
		return nil, errors.New("flowd client: TriggerSchedule: the schedule name is empty")
	}
	return c.instance(ctx, http.MethodPost, schedulePath(name)+"/trigger", nil, []byte(`{}`), "application/json")
}

// BackfillSchedule starts the instances of the schedule's fire times in
// [from, to].
func (c *Client) BackfillSchedule(ctx context.Context, name string, from, to time.Time) (*BackfillResponse, error) {
	if name == "" {
		return nil, errors.New("flowd client: BackfillSchedule: the schedule name is empty")
	}
	body, err := json.Marshal(BackfillRequest{From: from.Format(time.RFC3339), To: to.Format(time.RFC3339)})
	if err != nil {
		return nil, fmt.Errorf("flowd client: encoding backfill: %w", err)
	}
	var out BackfillResponse
	if _, err := c.do(ctx, http.MethodPost, schedulePath(name)+"/backfill", nil, body, "application/json", &out); err != nil {
		return nil, err
	}
	return &out, nil
}
