// The compiled task tree: every task of a document, addressed by its JSON
// pointer, with what the machine needs to run it.

package sw

import (
	"encoding/json"
	"time"
)

// Task kinds.
const (
	kindCall   = "call"
	kindDo     = "do"
	kindEmit   = "emit"
	kindFor    = "for"
	kindFork   = "fork"
	kindListen = "listen"
	kindRaise  = "raise"
	kindRun    = "run"
	kindSet    = "set"
	kindSwitch = "switch"
	kindTry    = "try"
	kindWait   = "wait"
)

// Flow directives.
const (
	thenContinue = "continue"
	thenExit     = "exit"
	thenEnd      = "end"
)

type node struct {
	name, ptr, kind string
	def             map[string]any // the task as written
	defJSON         json.RawMessage
	scope           []string // extra variables visible here ("$item", …)

	cond      string // `if`, "" when none
	inputFrom any    // nil when none
	outputAs  any
	exportAs  any
	then      string
	timeout   time.Duration

	inputSchema, outputSchema, exportSchema *schema // nil when none

	list     *taskList // do, for.do, try
	catch    *catchDef
	branches []*node
	compete  bool

	forEach, forAt, forIn, forWhile string

	cases []switchCase
	wait  time.Duration

	listenMode  string // one | any | all
	filters     []eventFilter
	listenRead  string
	listenUntil string

	raise any // the error object (resolved from use.errors)
}

// taskList is a list of tasks run in sequence (do, for.do, try, catch.do,
// the document's do).
type taskList struct {
	ptr   string
	tasks []*node
}

func (l *taskList) index(name string) int {
	for i, t := range l.tasks {
		if t.name == name {
			return i
		}
	}
	return -1
}

type switchCase struct {
	name, ptr, when, then string
}

type eventFilter struct{ typ, subject string }

type catchDef struct {
	with       map[string]any
	as         string // "$error" by default
	when       string
	exceptWhen string
	retry      *retryPolicy
	do         *taskList
	scope      []string
}

type retryPolicy struct {
	when, exceptWhen string
	delay            time.Duration
	backoff          string // constant | linear | exponential
	count            int    // retries after the first run; -1 unlimited
	limit            time.Duration
}

// isPure reports whether a task is a leaf evaluated without waiting on
// anything outside the machine.
func (n *node) isPure() bool {
	switch n.kind {
	case kindSet, kindSwitch, kindRaise:
		return true
	case kindWait:
		return n.wait == 0
	}
	return false
}
