package engine

import "context"

// SetDecideHook makes every decision of e call hook, with the decision's
// context, where it gets its rules: before they evaluate any program. nil
// removes it.
func SetDecideHook(e *Engine, hook func(ctx context.Context)) {
	if hook == nil {
		e.decideHook.Store(nil)
		return
	}
	e.decideHook.Store(&hook)
}

// SetBulkHook makes every write of a bulk operation call hook with the
// instance's id once the filter has been checked on the instance read,
// before the write. nil removes it.
func SetBulkHook(e *Engine, hook func(ctx context.Context, id string)) {
	if hook == nil {
		e.bulkHook.Store(nil)
		return
	}
	e.bulkHook.Store(&hook)
}
