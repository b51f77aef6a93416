package store

import "github.com/flowd/flowd/workflow"

// ShowAttemptsInFlight counts, in st, the attempt each RUNNING step's
// leased task runs (inFlight: step id → the attempt of its task, the task
// of a step without foreach), when it is more than st counts. A claim
// leases a task without writing its instance, so the state as stored
// counts an attempt from the version that ends it (or from a completion
// that leased the step in its own write); an instance as read shows the
// attempt that runs, as a step's `attempts` promises ("the attempts
// delivered so far"). It changes st in place. Only what a reader is
// shown goes through it (Querier.GetWithAttemptsInFlight): a write
// decided on it would store the attempt in flight, and the next write,
// decided on the state as stored, would count one less.
func ShowAttemptsInFlight(st *workflow.State, inFlight map[string]int) {
	for id, attempt := range inFlight {
		if s := st.Steps[id]; s != nil && s.Status == workflow.StepRunning && s.Attempts < attempt {
			s.Attempts = attempt
		}
	}
}
