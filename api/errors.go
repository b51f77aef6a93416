package api

// ErrorBody is the body of every error response: {"error", "message"}.
type ErrorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
	// Problems lists every validation problem of a rejected definition or
	// schedule.
	Problems []string `json:"problems,omitempty"`
	// Outcome is "unknown" on a 503 for a write whose commit was under way
	// when the database connection broke: it may or may not have been
	// stored, so read before repeating it. Absent when the write certainly
	// did not happen.
	Outcome string `json:"outcome,omitempty"`
}

// OutcomeUnknown is ErrorBody.Outcome for a write that may have been stored.
const OutcomeUnknown = "unknown"
