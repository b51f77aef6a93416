-- A placeholder for a migration of another branch, dropped when the two
-- are merged.

-- +goose Up
SELECT 1;

-- +goose Down
SELECT 1;
