package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/flowd/flowd/workflow"
)

// errDefMissing asks the caller to load a definition outside the transaction
// and run it again: loading inside could wait for a connection the
// transaction itself holds (SQLite's single writer).
type errDefMissing struct{ key defKey }

func (e errDefMissing) Error() string {
	return fmt.Sprintf("definition %s revision %d not loaded", e.key.name, e.key.rev)
}

// cached returns a compiled revision that is already loaded, or errDefMissing.
func (e *Engine) cached(inst *workflow.Instance) (*compiled, error) {
	key := defKey{inst.Definition, inst.DefinitionRevision}
	e.cacheMu.Lock()
	c, ok := e.cache[key]
	e.cacheMu.Unlock()
	if !ok {
		return nil, errDefMissing{key}
	}
	return c, nil
}

// withDefs runs fn, and again after loading each definition fn found
// missing: as long as every run finds a new one missing (a batch may meet
// several), so it ends.
func (e *Engine) withDefs(ctx context.Context, fn func() error) error {
	loaded := map[defKey]bool{}
	for {
		err := fn()
		var miss errDefMissing
		if !errors.As(err, &miss) {
			return err
		}
		if loaded[miss.key] {
			return fmt.Errorf("definition cache kept missing %s revision %d", miss.key.name, miss.key.rev)
		}
		loaded[miss.key] = true
		if _, err := e.compiled(ctx, miss.key.name, miss.key.rev); err != nil {
			return err
		}
	}
}

// definitionOf is cached for a definition-based instance and nil for a
// free-form one, whose rules are those of its status alone.
func (e *Engine) definitionOf(inst *workflow.Instance) (*compiled, error) {
	if inst.Definition == "" {
		return nil, nil
	}
	return e.cached(inst)
}
