package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/flowd/flowd/store"
)

// Definitions (store.DefinitionStore) and instance counts (store.Counter).
// They are methods of querier, so they work on the Store and inside the
// store's own transactions (inTx).

var (
	_ store.DefinitionStore = (*Store)(nil)
	_ store.Counter         = (*Store)(nil)
	_ store.DefinitionStore = (*querier)(nil)
	_ store.Counter         = (*querier)(nil)
)

// definitionColumns is the column list scanDefinition reads, in its order.
const definitionColumns = `name, revision, spec, created_at`

// PutDefinition stores spec as revision latest+1 of name (1 for a new name)
// and returns (rev, true), unless spec equals the latest revision's, in which
// case it returns (latest, false) and stores nothing. Specs are compared as
// compacted JSON bytes: the engine passes canonical JSON, so equal definitions
// have equal bytes.
//
// The read of the latest revision and the insert run in one write
// transaction, which holds SQLite's write lock from BEGIN IMMEDIATE: two
// concurrent puts (in one process or several) run one after the other, so the
// second sees the first's revision and the unique violation that PostgreSQL
// must retry cannot happen here. Errors: ErrInvalidArgument for an empty name
// or a spec that is not JSON.
func (q *querier) PutDefinition(ctx context.Context, name string, spec json.RawMessage) (int, bool, error) {
	if name == "" {
		return 0, false, fmt.Errorf("%w: empty definition name", store.ErrInvalidArgument)
	}
	var canonical bytes.Buffer
	if err := json.Compact(&canonical, bytes.TrimSpace(spec)); err != nil {
		return 0, false, fmt.Errorf("%w: definition %q: spec is not valid JSON: %w", store.ErrInvalidArgument, name, err)
	}
	now := q.timestamp()
	var (
		rev     int
		created bool
	)
	err := q.write(ctx, func(c dbtx) error {
		var (
			latest     int
			latestSpec string
		)
		err := c.QueryRowContext(ctx,
			`SELECT revision, spec FROM workflow_definitions WHERE name = ?1 ORDER BY revision DESC LIMIT 1`,
			name).Scan(&latest, &latestSpec)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return interpretError(ctx, err)
		case latestSpec == canonical.String():
			rev, created = latest, false
			return nil
		}
		// A name that was deleted continues after the highest revision it
		// had: a revision number is never used twice for one name.
		var deleted int
		err = c.QueryRowContext(ctx, `SELECT revision FROM workflow_definition_tombstones WHERE name = ?1`, name).Scan(&deleted)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return interpretError(ctx, err)
		default:
			latest = max(latest, deleted)
		}
		if _, err := c.ExecContext(ctx,
			`INSERT INTO workflow_definitions (name, revision, spec, created_at) VALUES (?1, ?2, ?3, ?4)`,
			name, latest+1, canonical.String(), now); err != nil {
			return fmt.Errorf("definition %q revision %d: %w", name, latest+1, interpretError(ctx, err))
		}
		rev, created = latest+1, true
		return nil
	})
	if err != nil {
		return 0, false, err
	}
	return rev, created, nil
}

// ListDefinitions returns the latest revision of every definition, ordered
// by name ([] when there is none), or the one revision p asks for; see
// store.DefinitionStore. The primary key (name, revision) serves the scan,
// the max per name and the look-up of one.
func (q *querier) ListDefinitions(ctx context.Context, p store.ListDefinitionsParams) ([]*store.DefinitionRecord, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	defs := []*store.DefinitionRecord{}
	var rows *sql.Rows
	var err error
	switch {
	case p.Name == "":
		rows, err = q.read.QueryContext(ctx,
			`SELECT `+definitionColumns+` FROM workflow_definitions AS d
			WHERE revision = (SELECT max(revision) FROM workflow_definitions WHERE name = d.name)
			ORDER BY name`)
	case p.Revision < 0:
		return defs, nil
	case p.Revision == 0:
		rows, err = q.read.QueryContext(ctx,
			`SELECT `+definitionColumns+` FROM workflow_definitions WHERE name = ?1 ORDER BY revision DESC LIMIT 1`, p.Name)
	default:
		rows, err = q.read.QueryContext(ctx,
			`SELECT `+definitionColumns+` FROM workflow_definitions WHERE name = ?1 AND revision = ?2`, p.Name, p.Revision)
	}
	if err != nil {
		return nil, interpretError(ctx, err)
	}
	defer rows.Close()
	for rows.Next() {
		d, err := scanDefinition(rows)
		if err != nil {
			return nil, interpretError(ctx, err)
		}
		defs = append(defs, d)
	}
	if err := rows.Err(); err != nil {
		return nil, interpretError(ctx, err)
	}
	return defs, nil
}

// CountInstances reads the counts p asks for (see store.Counter). The
// (status, updated_at) index covers both.
func (q *querier) CountInstances(ctx context.Context, p store.CountParams) (store.InstanceCounts, error) {
	return store.CountReads{
		ByStatus: func(ctx context.Context) (map[string]int64, error) {
			return q.countGrouped(ctx, `SELECT status, count(*) FROM workflow_instances GROUP BY status`)
		},
		Queued: func(ctx context.Context) (map[string]int64, error) {
			return q.countGrouped(ctx, `SELECT definition, count(*) FROM workflow_instances
			WHERE status = 'QUEUED' AND concurrency_key IS NOT NULL GROUP BY definition`)
		},
	}.Count(ctx, p)
}

// countGrouped runs query, whose rows are (group, count), into a map.
func (q *querier) countGrouped(ctx context.Context, query string) (map[string]int64, error) {
	rows, err := q.read.QueryContext(ctx, query)
	if err != nil {
		return nil, interpretError(ctx, err)
	}
	defer rows.Close()
	counts := map[string]int64{}
	for rows.Next() {
		var (
			group string
			n     int64
		)
		if err := rows.Scan(&group, &n); err != nil {
			return nil, interpretError(ctx, err)
		}
		counts[group] = n
	}
	if err := rows.Err(); err != nil {
		return nil, interpretError(ctx, err)
	}
	return counts, nil
}

// scanDefinition reads the definitionColumns of one row. Errors are returned
// as they are (sql.ErrNoRows included).
func scanDefinition(row scanner) (*store.DefinitionRecord, error) {
	var (
		d         store.DefinitionRecord
		spec      string
		createdAt int64
	)
	if err := row.Scan(&d.Name, &d.Revision, &spec, &createdAt); err != nil {
		return nil, err
	}
	d.Spec = json.RawMessage(spec)
	d.CreatedAt = fromMicros(createdAt)
	return &d, nil
}
