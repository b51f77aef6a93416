package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// The create statements. Each is one data-modifying CTE: the instance (i),
// its history row (h) and, as asked, its first tasks (t), the NOTIFY (n) and
// its idempotency key (k) are one statement, hence one round trip and atomic
// without an explicit transaction. Every variant returns three columns:
// created, stale (the definition revision is not stored, or a newer one is under LatestRevision) and keyUsed (the
// idempotency key is live, nothing was written).
//
// $1–$10 are the instance's; with tasks, $11–$24 the tasks' columns (as
// insertTasksSQL's $1–$14) and $25 whether to notify; with a key, the three
// parameters after those: the key, the request hash and the cut-off before
// which a recorded key no longer counts; then the parent link's three
// (parent_id, parent_step, parent_index; NULL for an instance without one)
// and the traceparent (NULL for none); with tasks, the tasks' iterations and
// flow control (tailParams); then the instance's concurrency key and limit;
// the instance's priority; the actor of its history row; for an
// instance that takes or waits for a slot of its concurrency key, the
// change's two counts (store.CreateParams.SlotChange); last, the instance
// it re-runs (NULL for none).

// createVariant selects a create statement: with tasks, with an
// idempotency key, with a change to the counts of a concurrency key.
type createVariant struct{ withTasks, keyed, slot, search bool }

// createStatement is a variant's statement, and its strict form for
// ApplyGroup, which fails with FD409 when it creates nothing: in a group,
// any miss has to roll back all of it.
type createStatement struct{ plain, strict string }

var createStatements = func() map[createVariant]createStatement {
	m := map[createVariant]createStatement{}
	for i := range 16 {
		v := createVariant{withTasks: i&1 != 0, keyed: i&2 != 0, slot: i&4 != 0, search: i&8 != 0}
		sql := buildCreateSQL(v)
		m[v] = createStatement{plain: sql, strict: sql + `,
	CASE WHEN NOT EXISTS (SELECT 1 FROM i) THEN flowd_conflict(format('workflow %s was not created', $1::text)) END`}
	}
	return m
}()

// createRevision (the CTE d) holds the definition revision $8 of $2 that an
// instance of a definition starts with, locked FOR KEY SHARE: a
// DeleteDefinition that deletes it first makes d empty (the row lock waits
// for that delete and then skips the deleted row), and one that comes
// second waits for this statement's transaction and then sees the new
// instance. So no instance is created for a definition whose delete
// succeeded. A free-form instance ($2 ” or $8 0) names no revision and
// locks nothing.
const createRevision = `d AS (
	SELECT 1 FROM workflow_definitions WHERE $8 > 0 AND $2::text <> '' AND name = $2 AND revision = $8 FOR KEY SHARE
)`

// createStale is true when the instance names a definition revision that
// is not stored (deleted), or, under LatestRevision ($10), the definition
// has a revision newer than $8. Nothing is created then.
const createStale = `(($8 > 0 AND $2::text <> '' AND NOT EXISTS (SELECT 1 FROM d))
	OR ($10::boolean AND EXISTS (SELECT 1 FROM workflow_definitions WHERE name = $2 AND revision > $8)))`

// createIterationsParam is the number of the parameter holding the new
// tasks' iterations, the first of their tailParams: after the parent
// link's three and the traceparent.
func createIterationsParam(v createVariant) int {
	if v.keyed {
		return 33
	}
	return 30
}

// createConcurrencyParam is the number of the parameter holding the
// instance's concurrency key (NULL for none), the limit's is the next one:
// after the traceparent and, with tasks, their tailParams.
func createConcurrencyParam(v createVariant) int {
	switch {
	case v.withTasks:
		return createIterationsParam(v) + tailParams
	case v.keyed:
		return 18
	}
	return 15
}

// createPriorityParam is the number of the parameter holding the
// instance's priority, after the concurrency key and limit.
func createPriorityParam(v createVariant) int {
	return createConcurrencyParam(v) + 2
}

// createActorParam is the number of the parameter holding the actor of
// the history row: the last one, after the priority.
func createActorParam(v createVariant) int {
	return createPriorityParam(v) + 1
}

// createStepsParam is the number of the parameter holding the state's
// header (store.StepRecords), the next two its steps' ids and records:
// after the actor, before the slot change's counts.
func createStepsParam(v createVariant) int {
	return createActorParam(v) + 1
}

// createRerunParam is the number of the parameter holding the instance a
// re-run re-runs (NULL for none): the last one, after the slot change's
// counts.
func createRerunParam(v createVariant) int {
	if v.slot {
		return createStepsParam(v) + 5
	}
	return createStepsParam(v) + 3
}

// createSearchParam is the number of the parameter holding the names of
// the instance's search attributes, the next two their values and kinds:
// the last ones, after the re-run's.
func createSearchParam(v createVariant) int {
	return createRerunParam(v) + 1
}

func buildCreateSQL(v createVariant) string {
	var sql, guard string
	n := 10
	if v.withTasks {
		n = 25
	}
	if v.keyed {
		key, hash, cutoff := "$"+strconv.Itoa(n+1), "$"+strconv.Itoa(n+2), "$"+strconv.Itoa(n+3)
		// The key row comes first and the instance only if it was written:
		// of two statements with one key, the second waits on the first's
		// uncommitted row and then finds it (nothing written) or, if the
		// first rolled back, writes its own. A row older than the cut-off
		// is replaced. The instance INSERT has no ON CONFLICT here: an id
		// that is taken fails the statement with a unique violation, so
		// that the key is never recorded for an instance this request did
		// not create. The foreign key to the instance is checked at the end
		// of the statement, when the instance row exists.
		sql = `WITH ` + createRevision + `, k AS (
	INSERT INTO idempotency_keys (key, request_hash, workflow_id, created_at)
	SELECT ` + key + `, ` + hash + `, $1, $6
	WHERE NOT (` + createStale + `)
	ON CONFLICT (key) DO UPDATE SET request_hash = EXCLUDED.request_hash, workflow_id = EXCLUDED.workflow_id, created_at = EXCLUDED.created_at
	WHERE idempotency_keys.created_at < ` + cutoff + `
	RETURNING 1
), `
		guard = ` AND EXISTS (SELECT 1 FROM k)`
		n += 3
	} else {
		sql = `WITH ` + createRevision + `, `
	}
	// The parent link's three parameters come last (parentArgs), then the
	// traceparent.
	pid, pstep, pindex, tp := "$"+strconv.Itoa(n+1), "$"+strconv.Itoa(n+2), "$"+strconv.Itoa(n+3), "$"+strconv.Itoa(n+4)
	// The concurrency key and limit come after everything else
	// (createConcurrencyParam).
	ckey, climit := "$"+strconv.Itoa(createConcurrencyParam(v)), "$"+strconv.Itoa(createConcurrencyParam(v)+1)
	sql += `i AS (
	INSERT INTO workflow_instances (id, definition, status, state, input, version, created_at, updated_at, definition_revision, deadline, parent_id, parent_step, parent_index, traceparent, concurrency_key, concurrency_limit, priority, rerun_of)
	SELECT $1, $2, $3, ` + param(createStepsParam(v)) + `::jsonb, $5::jsonb, 0, $6, $6, $8, $9, ` + pid + `::text, ` + pstep + `::text, ` + pindex + `::integer, ` + tp + `::text, ` + ckey + `::text, ` + climit + `::integer, $` + strconv.Itoa(createPriorityParam(v)) + `::smallint, ` + param(createRerunParam(v)) + `::text
	WHERE NOT (` + createStale + `)` + guard
	if !v.keyed {
		// ON CONFLICT DO NOTHING rather than a unique violation: an
		// existing id is reported by the empty result, so a Create in a
		// transaction of the store's (a schedule's fire) does not abort
		// it (PostgreSQL aborts a transaction on any error, SQLite does
		// not).
		sql += `
	ON CONFLICT (id) DO NOTHING`
	}
	sql += `
	RETURNING id, status
), h AS (
	INSERT INTO workflow_history (instance_id, version, status, state, at, cause, actor)
	SELECT id, 0, status, $4::jsonb, $6, $7, $` + strconv.Itoa(createActorParam(v)) + ` FROM i
), sr AS (
	INSERT INTO workflow_steps (instance_id, step_id, record)
	SELECT i.id, r.step_id, r.record FROM i, unnest(` + param(createStepsParam(v)+1) + `::text[], ` + param(createStepsParam(v)+2) + `::jsonb[]) AS r (step_id, record)
)`
	if v.search {
		// Only an instance with attributes has this part: the others
		// insert no row and plan nothing for it.
		n := createSearchParam(v)
		sql += `, sa AS (
	INSERT INTO workflow_search (instance_id, name, value, kind, created_at)
	SELECT i.id, a.name, a.value, a.kind, $6 FROM i, unnest(` + param(n) + `::text[], ` + param(n+1) + `::text[], ` + param(n+2) + `::text[]) AS a (name, value, kind)
)`
	}
	created := `EXISTS (SELECT 1 FROM i)`
	if v.slot {
		// The change to the key's row, made with the instance: a new
		// instance takes a slot only while one is free and none of the key
		// waits QUEUED, else the statement raises and writes nothing.
		holders, queued := param(createStepsParam(v)+3)+"::integer", param(createStepsParam(v)+4)+"::integer"
		sql += `, s AS (
	` + slotUpsert("$2::text", ckey+"::text", "FROM i", holders, queued, climit+"::integer", true) + `
)`
		created = `CASE WHEN ` + holders + ` > 0 AND ` + created + ` AND NOT EXISTS (SELECT 1 FROM s) THEN flowd_conflict(CASE
		WHEN EXISTS (SELECT 1 FROM concurrency_slots WHERE definition = $2 AND key = ` + ckey + ` AND queued > 0)
			THEN format('` + slotMissPrefix + `instances of concurrency key %L of definition %s wait QUEUED', ` + ckey + `::text, $2::text)
		ELSE format('` + slotMissPrefix + `all %s slots of concurrency key %L of definition %s are held', ` + climit + `::integer, ` + ckey + `::text, $2::text) END)
	ELSE ` + created + ` END`
	}
	if v.withTasks {
		// The tasks' foreign key is checked at the end of the statement,
		// when the instance row exists (as the history row's is). Their ids
		// are new and their instance too, so nothing can be taken; should a
		// unique violation happen all the same, the whole statement fails
		// and nothing is written.
		sql += `, t AS (
	` + insertTasksPrefix + `$6, $6
	FROM ` + newTasks11(createIterationsParam(v)) + `
	WHERE EXISTS (SELECT 1 FROM i)
	RETURNING 1
), n AS (
	SELECT pg_notify('` + notifyChannel + `', '') FROM i WHERE $25::boolean
)`
		created = `(SELECT count(*) FROM t) + (SELECT count(*) FROM n) >= 0 AND ` + created
	}
	keyUsed := `false`
	if v.keyed {
		keyUsed = `NOT EXISTS (SELECT 1 FROM k) AND NOT (` + createStale + `)`
	}
	return sql + `
SELECT ` + created + `, ` + createStale + `, ` + keyUsed
}

// keyOwnerSQL reads the instance and request hash an idempotency key names.
const keyOwnerSQL = `SELECT workflow_id, request_hash FROM idempotency_keys WHERE key = $1`

// Create inserts the instance, its history row 0 and, as asked, its tasks
// and idempotency key in one statement. A live key is answered with an
// *store.IdempotencyKeyError naming the instance it created.
func (q *querier) Create(ctx context.Context, p store.CreateParams) (_ *workflow.Instance, err error) {
	defer q.settle(&err) // a write of its own on the pool
	p.Actor = store.WriteActor(ctx, p.Actor)
	if p.Descendant != nil {
		// The count is a statement of its own, in the create's
		// transaction: a group of one.
		created, _, err := q.ApplyGroup(ctx, []store.CreateParams{p}, nil, nil)
		if err != nil {
			return nil, err
		}
		return created[0], nil
	}
	pc, err := q.prepareCreate(p)
	if err != nil {
		return nil, err
	}
	// The key's row can go between the statement that found it and the
	// read of its owner (its instance deleted, the key expired and swept):
	// then the key is free and the create runs again.
	for range 3 {
		var created, stale, keyUsed bool
		if err := q.db.QueryRow(ctx, pc.sql, pc.args...).Scan(&created, &stale, &keyUsed); err != nil {
			return nil, interpretError(err, pc.p.ID)
		}
		if !keyUsed {
			return pc.result(created, stale)
		}
		var owner, hash string
		err := q.db.QueryRow(ctx, keyOwnerSQL, pc.p.IdempotencyKey).Scan(&owner, &hash)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, interpretError(err, pc.p.ID)
		}
		return nil, &store.IdempotencyKeyError{Key: pc.p.IdempotencyKey, WorkflowID: owner, SameRequest: hash == pc.p.RequestHash}
	}
	return nil, &store.ConflictError{ID: pc.p.ID, Actual: -1, Reason: fmt.Sprintf("idempotency key %q kept changing; try again", pc.p.IdempotencyKey)}
}

// deleteKeysSQL deletes a batch of expired keys; SKIP LOCKED keeps the
// sweepers of several nodes from waiting for each other.
const deleteKeysSQL = `DELETE FROM idempotency_keys WHERE key = ANY (ARRAY(
	SELECT key FROM idempotency_keys WHERE created_at < $1 ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED))`

// deleteKeysBefore deletes at most limit keys created before t (checked
// by store.PruneParams.Check).
func (s *Store) deleteKeysBefore(ctx context.Context, t time.Time, limit int) (int, error) {
	tag, err := s.pool.Exec(ctx, deleteKeysSQL, t, limit)
	if err != nil {
		return 0, interpretError(err, "")
	}
	return int(tag.RowsAffected()), nil
}
