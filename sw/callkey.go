// The retries of one call inside a try: one idempotency key and a
// counting attempt across them, so that a handler can deduplicate.

package sw

import "strconv"

// CallIssues is what a try frame remembers of one call inside its try
// list, for the calls its retries issue again.
type CallIssues struct {
	// First is the id of the call's first item: every issue of the call
	// keeps its idempotency key.
	First string `json:"first"`
	// Latest is the id of the call's latest item.
	Latest string `json:"latest"`
	// Attempts is how many attempts the call's items made, as their
	// results said (Result.Attempts).
	Attempts int `json:"attempts"`
	// Try is the try frame's Attempt when the call was latest issued: the
	// same call issued again by the same run of the try list (a then that
	// jumps back) is a new call, not a retry.
	Try int `json:"try,omitempty"`
}

// enclosingTries returns the try frames whose retry would issue the call
// of frame f again (those in their try phase), innermost first, each with
// the call's identity within it: its pointer and the iterations of the
// for loops between them, for a call in a loop is one call per iteration.
func (x *exec) enclosingTries(f *Frame) ([]*Frame, []string) {
	var tries []*Frame
	var idents []string
	ident := f.Ptr
	for c := x.parent(f); c != nil; c = x.parent(c) {
		if c.List {
			continue
		}
		n := x.task(c)
		if n == nil {
			continue
		}
		switch {
		case n.kind == kindTry && c.Phase == phaseTry:
			tries = append(tries, c)
			idents = append(idents, ident)
		case n.kind == kindFor:
			ident += "@" + strconv.Itoa(c.Index)
		}
	}
	return tries, idents
}

// reissue fills in call item it of frame f, before it is added, from an
// earlier issue of the same call that a try's retry repeats: the first
// item's key (KeyOf) and the attempts made so far (Attempt). The
// outermost try that knows the call decides: its record is the oldest.
func (x *exec) reissue(f *Frame, it *Item) {
	tries, idents := x.enclosingTries(f)
	for i := len(tries) - 1; i >= 0; i-- {
		if rec, ok := tries[i].Calls[idents[i]]; ok && tries[i].Attempt > rec.Try {
			it.KeyOf, it.Attempt = rec.First, rec.Attempts
			return
		}
	}
}

// recordIssue remembers call item it of frame f in every try frame that
// encloses it.
func (x *exec) recordIssue(f *Frame, it Item) {
	tries, idents := x.enclosingTries(f)
	first := it.KeyOf
	if first == "" {
		first = it.ID
	}
	for i, c := range tries {
		if c.Calls == nil {
			c.Calls = map[string]CallIssues{}
		}
		c.Calls[idents[i]] = CallIssues{First: first, Latest: it.ID, Attempts: it.Attempt, Try: c.Attempt}
	}
}

// recordAttempts counts the attempts call item it of frame f made, as its
// result says, in the try frames that remember it.
func (x *exec) recordAttempts(f *Frame, it Item, res Result) {
	if it.Kind != ItemCall {
		return
	}
	made := res.Attempts
	if made < it.Attempt+1 {
		made = it.Attempt + 1 // a result that does not say: one attempt
	}
	tries, idents := x.enclosingTries(f)
	for i, c := range tries {
		if rec, ok := c.Calls[idents[i]]; ok && rec.Latest == it.ID {
			rec.Attempts = made
			c.Calls[idents[i]] = rec
		}
	}
}
