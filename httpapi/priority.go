package httpapi

import (
	"fmt"
	"net/http"

	"github.com/flowd/flowd/workflow"
)

// startPriority is the priority a POST /v1/workflows asks for: 0 when it
// gives none (the definition's applies), 1–5 otherwise; anything else is
// a 400.
func startPriority(req CreateWorkflowRequest) (int, error) {
	if req.Priority == nil {
		return 0, nil
	}
	if msg := workflow.PriorityProblem(*req.Priority); msg != "" {
		return 0, httpError(http.StatusBadRequest, fmt.Sprintf(`"priority" %s`, msg))
	}
	return *req.Priority, nil
}
