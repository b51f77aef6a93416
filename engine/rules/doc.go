// Package rules holds the workflow rules of the engine, as pure functions:
// given a compiled definition, an instance, its tasks, the time and an event
// (a start, a delivered attempt, a completed, failed or expired attempt, a
// step completed from outside, an action, a timeout), they say what changes —
// the instance's new status, state and deadline, the history cause, the
// tasks to insert and to update (each with the guard its write needs) and
// whether workers must be woken.
//
// Every rule of how a workflow runs lives here once: which steps are ready,
// how a step's task is scheduled and its input rendered, when an instance
// settles COMPLETED or FAILED, how retries back off, who may complete an
// attempt (fencing), what each action and status transition does. The engine
// reads what a decision needs, calls this package, and writes the result; it
// decides nothing itself. The two definition languages, flowd DAGs and
// Serverless Workflow documents, meet these rules through one interface,
// Language (language.go), which a compiled Definition holds: the rules
// never ask which language they run.
//
// No I/O: the package imports only the standard library and the workflow
// package. The time is an argument; fresh ids (task ids, lease tokens) and
// the jitter of retry backoff come from an Env, so that tests are
// deterministic.
//
// A decision works on the instance it is given and leaves it as the write
// must store it (status, state, deadline): the caller passes the working copy
// it is going to write, so that no state is copied or encoded twice on the
// hot path. A decision that fails (a typed error) may have changed that copy
// and must be thrown away with it.
package rules
