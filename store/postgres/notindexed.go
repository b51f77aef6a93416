package postgres

// notIndexed is column as an expression that no index can serve, for a
// condition a row found by its primary key must also meet. PostgreSQL
// plans a prepared statement once for the connection's life (a generic
// plan), from the table's size at that moment; on a new database every
// index of a small table costs the same, so an index that a condition on
// another column can use (the instances by status, the queued tasks, an
// instance's tasks) is sometimes picked over the primary key, and the
// write then reads every running instance or queued task for as long as
// the connection lives. Written so, the condition is only a filter.
func notIndexed(column string) string { return column + " || ''" }
