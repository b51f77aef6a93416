package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	sqlitedriver "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/flowd/flowd/store"
)

// interpretError maps an error from database/sql or the driver to the store
// contract, once, by SQLite's numeric result codes (extended codes are on in
// modernc): never by message text. Context errors pass through, so
// errors.Is(err, context.Canceled) holds for a cancelled caller.
//
// No driver type leaves the package: a SQLite error the contract has no name
// for becomes an error carrying only its text.
func interpretError(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if ctxErr := ctx.Err(); ctxErr != nil && cancellation(err) {
		return ctxErr
	}
	return driverError(err)
}

// cancellation reports whether err is how database/sql or SQLite report a
// statement or transaction that a done context cut short: SQLITE_INTERRUPT
// from the driver's sqlite3_interrupt, ErrTxDone after database/sql rolled the
// transaction back on its own.
func cancellation(err error) bool {
	var se *sqlitedriver.Error
	if errors.As(err, &se) {
		return se.Code()&0xff == sqlite3.SQLITE_INTERRUPT
	}
	return errors.Is(err, sql.ErrTxDone) || errors.Is(err, sql.ErrConnDone) || errors.Is(err, driver.ErrBadConn)
}

// driverError does the code mapping of interpretError.
func driverError(err error) error {
	var se *sqlitedriver.Error
	if !errors.As(err, &se) {
		return err
	}
	code := se.Code()
	switch {
	case code == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY, code == sqlite3.SQLITE_CONSTRAINT_UNIQUE:
		return fmt.Errorf("sqlite: %s: %w", err.Error(), store.ErrExists)
	case code == sqlite3.SQLITE_CONSTRAINT_CHECK:
		return fmt.Errorf("sqlite: %s: %w", err.Error(), store.ErrInvalidArgument)
	case code&0xff == sqlite3.SQLITE_FULL:
		// The disk (or max_page_count) left no room to grow the file or its
		// WAL: SQLite rolled the statement back.
		return fmt.Errorf("sqlite: %s: %w", err.Error(), store.ErrStorageFull)
	case code&0xff == sqlite3.SQLITE_BUSY, code&0xff == sqlite3.SQLITE_LOCKED:
		// SQLITE_BUSY (and BUSY_SNAPSHOT, BUSY_TIMEOUT, …) after busy_timeout,
		// or SQLITE_LOCKED: another writer held the lock too long. Nothing was
		// written; a fresh attempt may succeed.
		return &store.ConflictError{Reason: "database is locked", Actual: -1}
	}
	return errors.New("sqlite: " + err.Error())
}

// foreignKeyViolation reports whether err is SQLite's foreign key violation,
// which the caller maps to ErrNotFound of the row it referenced.
func foreignKeyViolation(err error) bool {
	var se *sqlitedriver.Error
	return errors.As(err, &se) && se.Code() == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY
}
