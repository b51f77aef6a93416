package store

import "fmt"

// Isolation is a transaction isolation level from a closed set: it is never
// built from user text, so it can never carry SQL.
type Isolation int

// The isolation levels WithTx accepts. The zero value is ReadCommitted.
const (
	ReadCommitted Isolation = iota
	RepeatableRead
	Serializable
)

func (i Isolation) String() string {
	switch i {
	case ReadCommitted:
		return "READ COMMITTED"
	case RepeatableRead:
		return "REPEATABLE READ"
	case Serializable:
		return "SERIALIZABLE"
	}
	return fmt.Sprintf("Isolation(%d)", int(i))
}

// Valid reports whether i is one of the declared levels.
func (i Isolation) Valid() bool { return i >= ReadCommitted && i <= Serializable }

// CheckIsolation returns ErrInvalidArgument for a level outside the enum.
func CheckIsolation(i Isolation) error {
	if !i.Valid() {
		return fmt.Errorf("%w: isolation level %d", ErrInvalidArgument, int(i))
	}
	return nil
}
