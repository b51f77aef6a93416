package main

import (
	"cmp"
	"flag"
	"fmt"
	"io"
	"time"
)

// newFlags is a subcommand's flag set, with the --db flag every
// subcommand but compare takes; its errors and help go to stderr.
func newFlags(name string, db *string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(db, "db", "", "PostgreSQL URL of the run's database (a fresh one), required")
	return fs
}

// parseFlags parses args into fs and refuses a missing --db.
func parseFlags(fs *flag.FlagSet, args []string, db *string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *db == "" {
		return fmt.Errorf("--db is required")
	}
	return nil
}

// firstError is the first of the checks that failed, nil when none did.
func firstError(checks ...error) error { return cmp.Or(checks...) }

// atLeastOne is the check of a count flag.
func atLeastOne(name string, v int) error {
	if v < 1 {
		return fmt.Errorf("--%s must be at least 1, got %d", name, v)
	}
	return nil
}

// positive is the check of a duration flag.
func positive(name string, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("--%s must be positive, got %s", name, d)
	}
	return nil
}
