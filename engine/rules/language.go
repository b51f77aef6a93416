package rules

import (
	"encoding/json"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// Language is how the rules run the instances of one definition language:
// flowd DAGs (dag.go) or Serverless Workflow documents (sw.go). The rules
// shared by both (fencing, leases, the version and state limits, actions'
// status table, events' matching) call it where the languages differ; a
// compiled Definition holds the one its revision is written in, chosen by
// Compile.
//
// The methods that decide take the instance they decide on and the change
// being built, as the rules calling them do (doc.go), and leave both as the
// write must store them.
type Language interface {
	// CanRetry reports whether a FAILED or TIMED_OUT instance may be
	// retried: its failed and interrupted steps run again.
	CanRetry() bool
	// ChildDefinition is the definition that step of inst starts a child
	// workflow of ("" when step starts none).
	ChildDefinition(inst *workflow.Instance, step string) string

	// completesStepsFromOutside reports whether a step may be completed
	// through the API rather than by its worker, event or timer.
	completesStepsFromOutside() bool

	// start starts a new instance: RUNNING, its deadline, its first tasks.
	start(env Env, inst *workflow.Instance, now time.Time) (Change, error)
	// taskCompleted decides the instance's side of t's completion with
	// output; the caller has added t's own update (DONE).
	taskCompleted(env Env, inst *workflow.Instance, t *store.Task, output json.RawMessage, now time.Time, ch *Change) error
	// taskFailed decides a failed attempt of t, msg its error: a failure
	// its worker reported (retryable says whether a retry may help), or
	// (expired) a lease that ran out. It adds t's update, guarded by t as
	// read (the caller decided its lease ended, or CheckLease accepted it).
	taskFailed(env Env, inst *workflow.Instance, t *store.Task, msg string, retryable, expired bool, now time.Time, ch *Change) error
	// eventTaken decides the instance's side of ev completing t's step;
	// the caller adds t's update and checks the state's size.
	eventTaken(env Env, inst *workflow.Instance, t *store.Task, ev Event, now time.Time, ch *Change) error
	// eventUndelivered fails t's step for good, reason saying why the
	// event it took cannot be recorded; the caller adds t's update.
	eventUndelivered(env Env, inst *workflow.Instance, t *store.Task, reason string, now time.Time, ch *Change) error
	// reopen schedules what an instance that runs again (a resume, or a
	// retry) runs; write is false when that changes nothing the status
	// change does not already say.
	reopen(env Env, inst *workflow.Instance, existing map[string]*store.Task, retry bool, now time.Time, ch *Change) (write bool)
	// abort ends the language's own record of inst's run for good with
	// msg, when the instance fails past a limit (failInstance): the rules
	// have already cancelled its steps' tasks.
	abort(inst *workflow.Instance, msg string) error
}
