package api

// RerunRequest is the body of POST /v1/workflows/{id}/rerun: From, the
// step of a flowd definition to re-run from, or FromSeq, for a code
// workflow, the seq of the first journal entry to record again; ID, the
// re-run's id (a new one when absent).
type RerunRequest struct {
	From    string `json:"from,omitempty"`
	FromSeq int    `json:"from_seq,omitempty"`
	ID      string `json:"id,omitempty"`
}
