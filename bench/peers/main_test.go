package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// Every mistake on the command line exits 2 with a message, before any
// connection is tried.
func TestUsageMistakes(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "usage:"},
		{[]string{"temporal"}, `unknown subcommand "temporal"`},
		{[]string{"dbos"}, "--db is required"},
		{[]string{"dbos", "--db", "postgres://x/y", "--clients", "0"}, "--clients must be at least 1, got 0"},
		{[]string{"dbos", "--db", "postgres://x/y", "--duration", "0s"}, "--duration must be positive, got 0s"},
		{[]string{"dbos", "--db", "postgres://x/y", "--duration", "soon"}, `invalid value "soon" for flag -duration`},
		{[]string{"river"}, "--db is required"},
		{[]string{"river", "--db", "postgres://x/y", "--jobs", "0"}, "--jobs must be at least 1, got 0"},
		{[]string{"river", "--db", "postgres://x/y", "--workers", "-1"}, "--workers must be at least 1, got -1"},
		{[]string{"river", "--db", "postgres://x/y", "--timeout", "-1s"}, "--timeout must be positive, got -1s"},
		{[]string{"river", "--db", "postgres://x/y", "--fetch-cooldown", "1us"}, "--fetch-cooldown must be 0 (River's default) or at least 1ms, got 1µs"},
		{[]string{"rows"}, "--db is required"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), c.args, strings.NewReader(""), &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("peers %v: exit %d, stderr %q; want exit 2 and %q", c.args, code, stderr.String(), c.want)
		}
		if stdout.Len() != 0 {
			t.Errorf("peers %v printed on stdout: %q", c.args, stdout.String())
		}
	}
}

// rows refuses a line that is not a bench result before it connects
// (the URL here leads nowhere).
func TestRowsRefusesAFailedBenchLine(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"rows", "--db", "postgres://127.0.0.1:1/none"}, strings.NewReader("Error: cannot connect\n"), &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "not a bench JSON object") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}

func TestCompareWithoutRunsPrintsNothing(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"compare"}, strings.NewReader("nothing\n"), &stdout, &stderr); code != 0 || stdout.Len() != 0 {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
}

func TestRedactHidesThePassword(t *testing.T) {
	if got := redact("postgres://u:secret@h/db"); strings.Contains(got, "secret") {
		t.Errorf("redact kept the password: %s", got)
	}
}
