package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/store"
)

var _ store.DefinitionStore = (*Store)(nil)

const (
	// putDefinitionSQL is PutDefinition's whole transaction in one
	// statement: read the latest revision, and insert the next one unless
	// the latest has the same spec (jsonb equality: semantic, so key order
	// and spacing do not count). $2 is text cast twice, so that the stored
	// json keeps the caller's bytes. A concurrent put of the same name
	// that inserted the same revision first makes ON CONFLICT skip the
	// insert (no error, both results NULL): the caller retries, and then
	// sees that revision. A name that was deleted continues after the
	// highest revision it had (its tombstone): a revision number is never
	// used twice for one name.
	putDefinitionSQL = `WITH latest AS (
	SELECT revision, spec::jsonb = $2::text::jsonb AS same FROM workflow_definitions
	WHERE name = $1
	ORDER BY revision DESC
	LIMIT 1
), ins AS (
	INSERT INTO workflow_definitions (name, revision, spec, created_at)
	SELECT $1, GREATEST(COALESCE((SELECT revision FROM latest), 0),
		COALESCE((SELECT revision FROM workflow_definition_tombstones WHERE name = $1), 0)) + 1, $2::text::json, $3
	WHERE NOT EXISTS (SELECT 1 FROM latest WHERE same)
	ON CONFLICT DO NOTHING
	RETURNING revision
)
SELECT (SELECT revision FROM ins), (SELECT revision FROM latest WHERE same)`

	definitionColumns = `name, revision, spec, created_at`

	latestDefinitionSQL = `SELECT ` + definitionColumns + ` FROM workflow_definitions WHERE name = $1 ORDER BY revision DESC LIMIT 1`
	definitionSQL       = `SELECT ` + definitionColumns + ` FROM workflow_definitions WHERE name = $1 AND revision = $2`

	// Names are ordered bytewise, as SQLite and Go do.
	listDefinitionsSQL = `SELECT DISTINCT ON (name COLLATE "C") ` + definitionColumns + `
FROM workflow_definitions
ORDER BY name COLLATE "C", revision DESC`

	// putDefinitionAttempts bounds PutDefinition's retries: every round of
	// concurrent puts of one name lets at least one of them insert, so this
	// many concurrent writers of one name still all succeed.
	putDefinitionAttempts = 100
)

// PutDefinition stores spec as the next revision of name unless the latest
// revision has the same spec (compared as jsonb), and returns the revision
// and whether it was created. Concurrent puts of different specs all succeed,
// with different revisions. Errors: ErrInvalidArgument for an empty name or a
// spec that is not valid JSON (or holds text PostgreSQL cannot store).
func (s *Store) PutDefinition(ctx context.Context, name string, spec json.RawMessage) (int, bool, error) {
	if name == "" {
		return 0, false, fmt.Errorf("%w: empty definition name", store.ErrInvalidArgument)
	}
	if err := checkText("definition name", name); err != nil {
		return 0, false, err
	}
	if !json.Valid(spec) {
		return 0, false, fmt.Errorf("%w: definition %q: spec is not valid JSON", store.ErrInvalidArgument, name)
	}
	if err := checkJSON("definition spec", spec); err != nil {
		return 0, false, err
	}
	for range putDefinitionAttempts {
		var created, same *int
		err := s.pool.QueryRow(ctx, putDefinitionSQL, name, string(spec), s.timestamp()).Scan(&created, &same)
		switch {
		case err != nil:
			return 0, false, commitOutcome(interpretError(err, ""))
		case created != nil:
			return *created, true, nil
		case same != nil:
			return *same, false, nil
		}
		// Lost the race for the next revision: read again.
	}
	return 0, false, &store.ConflictError{Actual: -1, Reason: fmt.Sprintf("definition %q: too many concurrent revisions", name)}
}

// ListDefinitions returns the latest revision of every definition, ordered
// by name ([] when there is none), or the one revision p asks for; see
// store.DefinitionStore.
func (s *Store) ListDefinitions(ctx context.Context, p store.ListDefinitionsParams) ([]*store.DefinitionRecord, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	defs := []*store.DefinitionRecord{}
	var rows pgx.Rows
	var err error
	switch {
	case p.Name == "":
		rows, err = s.pool.Query(ctx, listDefinitionsSQL)
	case !storableText(p.Name) || p.Revision < 0 || p.Revision > math.MaxInt32:
		return defs, nil // no such definition can be stored
	case p.Revision == 0:
		rows, err = s.pool.Query(ctx, latestDefinitionSQL, p.Name)
	default:
		rows, err = s.pool.Query(ctx, definitionSQL, p.Name, int32(p.Revision))
	}
	if err != nil {
		return nil, interpretError(err, "")
	}
	defer rows.Close()
	for rows.Next() {
		d, err := scanDefinition(rows)
		if err != nil {
			return nil, interpretError(err, "")
		}
		defs = append(defs, d)
	}
	if err := rows.Err(); err != nil {
		return nil, interpretError(err, "")
	}
	return defs, nil
}

// scanDefinition reads the columns of definitionColumns. spec is json, so it
// comes back with the bytes it was stored with.
func scanDefinition(row pgx.Row) (*store.DefinitionRecord, error) {
	var (
		d        store.DefinitionRecord
		revision int32
		spec     []byte
	)
	if err := row.Scan(&d.Name, &revision, &spec, &d.CreatedAt); err != nil {
		return nil, err
	}
	d.Revision = int(revision)
	d.Spec = json.RawMessage(spec)
	d.CreatedAt = d.CreatedAt.UTC()
	return &d, nil
}
