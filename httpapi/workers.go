package httpapi

import (
	"net/http"
)

// listWorkers lists the workers of every node that polled in the last five
// minutes, the most recent poll first.
func (s *Server) listWorkers(w http.ResponseWriter, r *http.Request) {
	records, err := s.eng.ListWorkers(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := ListWorkersResponse{Workers: make([]Worker, 0, len(records))}
	for _, rec := range records {
		out.Workers = append(out.Workers, Worker{Worker: rec.Worker, Handlers: rec.Handlers, Node: rec.Node, LastPollAt: rec.LastPollAt, InFlight: rec.InFlight})
	}
	writeJSON(w, http.StatusOK, out)
}
