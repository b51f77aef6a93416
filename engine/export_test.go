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
