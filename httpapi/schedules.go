package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/store"
)

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

// putSchedule is PUT /v1/schedules/{name}: 201 created, 200 replaced; 400
// naming every problem of the schedule (its name included) at once.
func (s *Server) putSchedule(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
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
			problems := append(engine.ScheduleProblems(sc),
				fmt.Sprintf("catchup_window %q is not a positive Go duration such as 1m or 90s", req.CatchupWindow))
			s.fail(w, r, &store.ScheduleError{Problems: problems})
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
