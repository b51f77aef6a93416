-- History rows are decided and made in Go (internal/jsondelta's Row, the
-- policy both stores follow) and the write statements insert the row they
-- are given; rows are rebuilt into states in Go too. The functions that
-- made them in SQL are no longer called. Rows written by them read as
-- before: they have the same format.

-- +goose Up
DROP FUNCTION flowd_history_entry(text, bigint, jsonb, jsonb, jsonb, jsonb);
DROP FUNCTION flowd_json_apply(jsonb, jsonb);
DROP FUNCTION flowd_json_diff(jsonb, jsonb);

-- +goose Down
-- The functions as migration 00007 made them: its Down migration calls
-- flowd_json_apply and drops all three.

-- +goose StatementBegin
-- flowd_json_diff returns the patch that turns the object a into the
-- object b: "d" the keys to delete, "s" the keys to set whole (null, arrays
-- and scalars included), "m" the patches of keys that are objects on both
-- sides. It descends two levels — a state's top-level keys, then the members
-- of its objects (each step of "steps", each variable) — and sets whole what
-- changed below: every write of a version calls it, and one set-based query
-- costs a small fraction of a recursive function (a recursive plpgsql diff
-- cost about 0.3 ms per write for a three-step state and made the workflow
-- benchmark a third slower), while a step's or a variable's new value is
-- what a version changes anyway. Values compare by text as well as by jsonb
-- equality, which holds 1 and 1.0 equal: a history must give back exactly
-- the state that was written.
CREATE FUNCTION flowd_json_diff(a jsonb, b jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
WITH top AS (
    SELECT o.key AS okey, n.key AS nkey, o.value AS ov, n.value AS nv,
        coalesce(o.value = n.value AND o.value::text = n.value::text, false) AS same,
        coalesce(jsonb_typeof(o.value) = 'object' AND jsonb_typeof(n.value) = 'object', false) AS objects
    FROM jsonb_each(a) o FULL JOIN jsonb_each(b) n ON n.key = o.key
), sub AS (
    SELECT t.nkey AS key, (
        SELECT CASE WHEN d IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('d', d) END
            || CASE WHEN s IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('s', s) END
        FROM (SELECT jsonb_agg(o.key) FILTER (WHERE n.key IS NULL) AS d,
                jsonb_object_agg(n.key, n.value) FILTER (WHERE n.key IS NOT NULL
                    AND NOT coalesce(o.value = n.value AND o.value::text = n.value::text, false)) AS s
            FROM jsonb_each(t.ov) o FULL JOIN jsonb_each(t.nv) n ON n.key = o.key) c) AS patch
    FROM top t WHERE t.objects AND NOT t.same
), parts AS (
    SELECT (SELECT jsonb_agg(okey) FROM top WHERE nkey IS NULL) AS d,
        (SELECT jsonb_object_agg(key, patch) FROM sub) AS m,
        (SELECT jsonb_object_agg(nkey, nv) FROM top WHERE nkey IS NOT NULL AND NOT same AND NOT objects) AS s
)
SELECT CASE WHEN d IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('d', d) END
    || CASE WHEN m IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('m', m) END
    || CASE WHEN s IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('s', s) END
FROM parts
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- flowd_json_apply applies a flowd_json_diff patch (for the Down migration
-- and for looking at history in SQL; flowd rebuilds states in Go).
CREATE FUNCTION flowd_json_apply(doc jsonb, patch jsonb) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    k text;
    v jsonb;
BEGIN
    IF patch ? 'd' THEN
        doc := doc - ARRAY(SELECT jsonb_array_elements_text(patch->'d'));
    END IF;
    IF patch ? 's' THEN
        doc := doc || (patch->'s');
    END IF;
    FOR k, v IN SELECT key, value FROM jsonb_each(coalesce(patch->'m', '{}')) LOOP
        doc := jsonb_set(doc, ARRAY[k], flowd_json_apply(doc->k, v));
    END LOOP;
    RETURN doc;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- flowd_history_entry is what every statement that writes a version stores
-- in workflow_history.state: p_new's snapshot or patch row, p_old being
-- the state of the previous version (NULL: there is none). p_patch, when
-- the writer has it, is that patch already made (by internal/jsondelta, in
-- the writer's process, from the state the write was decided on): diffing
-- in SQL costs the server more than the rest of a step's write, so the
-- engine's hot writes (completions, deliveries) send their patch. The previous
-- version's stored row is read from the table, or given as p_prev when the
-- same statement writes it (it is not visible there yet). The policy is
-- jsondelta.SnapshotFactor (2): a patch while the read cost stays within
-- twice the state's text, else a snapshot; see internal/jsondelta for the
-- bounds that follow. VOLATILE: the previous row is read with a fresh
-- snapshot, so a statement that waited for the writer of the previous
-- version still finds that version's row.
CREATE FUNCTION flowd_history_entry(p_instance text, p_version bigint, p_old jsonb, p_new jsonb, p_prev jsonb DEFAULT NULL, p_patch jsonb DEFAULT NULL)
RETURNS jsonb LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    base  bigint;
    cost  bigint;
    patch jsonb;
BEGIN
    IF p_old IS NULL OR p_version = 0 THEN
        RETURN p_new;
    END IF;
    -- A small state changed by a writer that sent no patch is stored whole:
    -- below 4 KB a snapshot costs less than diffing it on the server (which
    -- halved the rate of replaces and step completions through the API).
    IF p_patch IS NULL AND pg_column_size(p_new) < 4096 AND NOT (p_old = p_new AND p_old::text = p_new::text) THEN
        RETURN p_new;
    END IF;
    IF p_prev IS NULL THEN
        SELECT state INTO p_prev FROM workflow_history WHERE instance_id = p_instance AND version = p_version - 1;
        IF p_prev IS NULL THEN
            RETURN p_new;
        END IF;
    END IF;
    IF jsonb_typeof(p_prev) = 'array' THEN
        base := (p_prev->>0)::bigint;
        cost := (p_prev->>1)::bigint;
    ELSE
        base := p_version - 1;
        cost := octet_length(p_prev::text);
    END IF;
    IF p_patch IS NOT NULL THEN
        patch := p_patch;
    ELSIF p_old = p_new AND p_old::text = p_new::text THEN
        -- The state did not change (a status-only version: a transition, a
        -- batch): no diff to make.
        patch := '{}';
    ELSE
        patch := flowd_json_diff(p_old, p_new);
    END IF;
    cost := cost + octet_length(patch::text);
    IF cost > 2 * octet_length(p_new::text) THEN
        RETURN p_new;
    END IF;
    RETURN jsonb_build_array(base, cost, patch);
END;
$$;
-- +goose StatementEnd
