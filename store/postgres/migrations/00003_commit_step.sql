-- CommitStep (store/postgres/tasks.go) writes a task, its instance and new
-- tasks in one statement. When the task's update matched and the instance's
-- did not (another writer moved the instance on), the statement calls this
-- function, whose error rolls the whole statement back: nothing is written.
-- SQLSTATE FD409 is mapped to store.ErrConflict.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION flowd_conflict(message text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'FD409', MESSAGE = message;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION flowd_conflict(text);
