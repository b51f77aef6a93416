package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/engine/rules"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/sw"
	"github.com/flowd/flowd/workflow"
)

// DefinitionInfo is a stored definition revision.
type DefinitionInfo struct {
	Name       string               `json:"name"`
	Revision   int                  `json:"revision"`
	CreatedAt  time.Time            `json:"created_at"`
	Definition *workflow.Definition `json:"definition"`
}

// UnmarshalJSON reads what the API shows of a revision (DefinitionFromAPI).
func (d *DefinitionInfo) UnmarshalJSON(data []byte) error {
	var raw api.DefinitionInfo
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	info, err := DefinitionFromAPI(&raw)
	if err != nil {
		return err
	}
	*d = *info
	return nil
}

// DefinitionFromAPI reads a revision as the API shows it (a client's copy):
// its definition is a Serverless Workflow document or flowd's steps.
func DefinitionFromAPI(raw *api.DefinitionInfo) (*DefinitionInfo, error) {
	d := &DefinitionInfo{Name: raw.Name, Revision: raw.Revision, CreatedAt: raw.CreatedAt}
	if len(raw.Definition) == 0 || string(raw.Definition) == "null" {
		return d, nil
	}
	if sw.IsDocument(raw.Definition) {
		d.Definition = &workflow.Definition{Name: raw.Name, Revision: raw.Revision, Serverless: raw.Definition}
		return d, nil
	}
	d.Definition = new(workflow.Definition)
	if err := json.Unmarshal(raw.Definition, d.Definition); err != nil {
		return nil, fmt.Errorf("definition %s revision %d: %w", raw.Name, raw.Revision, err)
	}
	return d, nil
}

// compiled is a definition revision with its templates compiled
// (rules.Definition), cached for the life of the process: a revision never
// changes.
type compiled = rules.Definition

func compile(def *workflow.Definition) (*compiled, error) { return rules.Compile(def) }

// PutDefinition parses (YAML or JSON), validates and stores a definition. It
// returns the stored revision and whether it is new: putting the same
// definition again returns the latest revision unchanged.
func (e *Engine) PutDefinition(ctx context.Context, data []byte) (*DefinitionInfo, bool, error) {
	return e.PutDefinitionAs(ctx, "", data)
}

// PutDefinitionAs is PutDefinition for a definition that must be named name
// (any name when it is empty): one named otherwise is invalid and not stored.
func (e *Engine) PutDefinitionAs(ctx context.Context, name string, data []byte) (*DefinitionInfo, bool, error) {
	def, canon, err := parseDefinition(data, name)
	if err != nil {
		return nil, false, err
	}
	rev, created, err := e.defs.PutDefinition(ctx, def.Name, canon)
	if err != nil {
		return nil, false, err
	}
	rec, err := store.GetDefinition(ctx, e.defs, def.Name, rev)
	if err != nil {
		return nil, false, err
	}
	info, err := toInfo(rec)
	if err != nil {
		return nil, false, err
	}
	// rev was the latest revision when it was stored or found equal: the
	// next start uses it without asking.
	if _, err := e.remember(info, true); err != nil {
		return nil, false, err
	}
	return info, created, nil
}

// GetDefinition returns revision rev of name (0: the latest).
func (e *Engine) GetDefinition(ctx context.Context, name string, rev int) (*DefinitionInfo, error) {
	rec, err := store.GetDefinition(ctx, e.defs, name, rev)
	if err != nil {
		return nil, err
	}
	return toInfo(rec)
}

// DeleteDefinition deletes every revision of name
// (store.DefinitionStore.DeleteDefinition: ErrNotFound, or
// store.ErrDefinitionInUse while an instance of it is live) and forgets
// them on this node, so that a start of name here answers "unknown
// definition" at once. Other nodes find out on their next start of it:
// the revision they remember fails the create's check in the store, and
// reading the latest revision finds none.
func (e *Engine) DeleteDefinition(ctx context.Context, name string) error {
	if err := e.defs.DeleteDefinition(ctx, name); err != nil {
		return err
	}
	e.forgetDefinition(name)
	return nil
}

// forgetDefinition drops name's compiled revisions and its latest one from
// this node's cache. Revision numbers are never reused, so a cached revision
// is never wrong, only unneeded once the definition is deleted.
func (e *Engine) forgetDefinition(name string) {
	e.cacheMu.Lock()
	defer e.cacheMu.Unlock()
	delete(e.latest, name)
	for k := range e.cache {
		if k.name == name {
			delete(e.cache, k)
		}
	}
}

// ListDefinitions returns the latest revision of every definition.
func (e *Engine) ListDefinitions(ctx context.Context) ([]*DefinitionInfo, error) {
	recs, err := e.defs.ListDefinitions(ctx, store.ListDefinitionsParams{})
	if err != nil {
		return nil, err
	}
	out := make([]*DefinitionInfo, 0, len(recs))
	for _, r := range recs {
		info, err := toInfo(r)
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	return out, nil
}

func toInfo(r *store.DefinitionRecord) (*DefinitionInfo, error) {
	var def workflow.Definition
	if sw.IsDocument(r.Spec) {
		// Parsed when it is compiled (rules.Compile), not for a listing.
		def = workflow.Definition{Name: r.Name, Serverless: r.Spec}
	} else if err := json.Unmarshal(r.Spec, &def); err != nil {
		return nil, fmt.Errorf("stored definition %s revision %d: %w", r.Name, r.Revision, err)
	}
	def.Revision = r.Revision
	return &DefinitionInfo{Name: r.Name, Revision: r.Revision, CreatedAt: r.CreatedAt, Definition: &def}, nil
}

// ErrDefinitionDeleted: the definition revision an instance runs was deleted
// (with its definition, once no live instance used it), so the instance cannot
// be retried or resumed: 409.
var ErrDefinitionDeleted = errors.New("definition deleted")

// compiled returns the cached compiled revision, loading it once.
func (e *Engine) compiled(ctx context.Context, name string, rev int) (*compiled, error) {
	key := defKey{name, rev}
	e.cacheMu.Lock()
	c, ok := e.cache[key]
	e.cacheMu.Unlock()
	if ok {
		return c, nil
	}
	rec, err := store.GetDefinition(ctx, e.defs, name, rev)
	if rev == 0 && errors.Is(err, store.ErrNotFound) {
		// Deleted, perhaps through another node: the next start must not
		// try the revision this node remembers first.
		e.forgetDefinition(name)
	}
	if rev != 0 && errors.Is(err, store.ErrNotFound) {
		// An instance names this revision, so it existed: it was deleted
		// with its definition, and the instance cannot run again.
		return nil, fmt.Errorf("definition %q revision %d no longer exists: %w", name, rev, ErrDefinitionDeleted)
	}
	if err != nil {
		return nil, err
	}
	if rev == 0 {
		// Usually compiled already: only the revision number was news.
		e.cacheMu.Lock()
		c, ok = e.cache[defKey{name, rec.Revision}]
		if ok {
			e.noteLatest(c)
		}
		e.cacheMu.Unlock()
		if ok {
			return c, nil
		}
	}
	info, err := toInfo(rec)
	if err != nil {
		return nil, err
	}
	return e.remember(info, rev == 0)
}

// remember returns info's revision compiled, compiling and caching it
// unless it is cached; as latest, it is also noted as its definition's
// latest revision.
func (e *Engine) remember(info *DefinitionInfo, latest bool) (*compiled, error) {
	key := defKey{info.Name, info.Revision}
	e.cacheMu.Lock()
	c, ok := e.cache[key]
	e.cacheMu.Unlock()
	if !ok {
		var err error
		if c, err = compile(info.Definition); err != nil {
			return nil, err
		}
	}
	e.cacheMu.Lock()
	defer e.cacheMu.Unlock()
	if cached, ok := e.cache[key]; ok {
		c = cached // compiled meanwhile: keep one
	} else {
		e.cache[key] = c
	}
	if latest {
		e.noteLatest(c)
	}
	return c, nil
}

// noteLatest records c as its definition's latest revision unless a newer
// one was seen. The caller holds cacheMu.
func (e *Engine) noteLatest(c *compiled) {
	if cur := e.latest[c.Def.Name]; cur == nil || cur.Def.Revision < c.Def.Revision {
		e.latest[c.Def.Name] = c
	}
}

// knownLatest returns the latest revision of name this node has seen, or
// nil.
func (e *Engine) knownLatest(name string) *compiled {
	e.cacheMu.Lock()
	defer e.cacheMu.Unlock()
	return e.latest[name]
}

// parseDefinition parses, validates and compiles a definition in either
// language — a Serverless Workflow document (sw.IsDocument), or flowd's
// steps — named name (any name when it is empty), and returns it with the
// bytes to store.
func parseDefinition(data []byte, name string) (*workflow.Definition, []byte, error) {
	if sw.IsDocument(data) {
		return parseServerless(data, name)
	}
	def, err := workflow.ParseDefinitionAs(data, name)
	if err != nil {
		return nil, nil, err
	}
	if _, err := compile(def); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", workflow.ErrInvalidDefinition, err)
	}
	canon, err := def.Canonical()
	if err != nil {
		return nil, nil, err
	}
	return def, canon, nil
}

// parseServerless is parseDefinition of a Serverless Workflow document:
// every problem sw.Parse finds is listed, as for a flowd definition, and
// the definition is named by document.name.
func parseServerless(data []byte, name string) (*workflow.Definition, []byte, error) {
	w, err := sw.Parse(data)
	var problems *sw.Problems
	if errors.As(err, &problems) {
		return nil, nil, &workflow.DefinitionError{Problems: problems.List}
	}
	if err != nil {
		return nil, nil, &workflow.DefinitionError{Problems: []string{err.Error()}}
	}
	if err := workflow.ValidateDefinitionName(w.Name); err != nil {
		return nil, nil, &workflow.DefinitionError{Problems: []string{"/document/name: " + err.Error()}}
	}
	if name != "" && w.Name != name {
		return nil, nil, &workflow.DefinitionError{Problems: []string{fmt.Sprintf("/document/name: is %q, but the definition is stored as %q: they must be equal", w.Name, name)}}
	}
	def := &workflow.Definition{Name: w.Name, Timeout: workflow.Duration(w.Timeout), Serverless: w.JSON}
	return def, w.JSON, nil
}
