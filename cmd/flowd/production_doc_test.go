package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/pgtest"
)

// The SQL of docs/production.md that creates flowd's database and role
// runs as written (its names made unique), as a superuser and as an admin
// that is not one (a managed service's), and then `flowd migrate` as that
// role creates the schema and finds it up to date the second time: the
// role has every privilege the migrations need, and no more than the
// document says.
func TestProductionDatabaseSetup(t *testing.T) {
	doc, err := os.ReadFile("../../docs/production.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- cmd/flowd/production_doc_test.go runs this block[^\n]*-->\n```sql\n(.*?)```\n").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/production.md has no SQL block marked for this test")
	}
	setupSQL := string(m[1])
	for _, want := range []string{"CREATE ROLE flowd LOGIN PASSWORD", "CREATE DATABASE flowd OWNER flowd"} {
		if !strings.Contains(setupSQL, want) {
			t.Fatalf("the documented SQL lacks %q:\n%s", want, setupSQL)
		}
	}
	superURL := pgtest.ServerURL(t)
	ctx := context.Background()
	admin := func(sql string) {
		t.Helper()
		if err := execAs(ctx, superURL, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	for _, as := range []string{"superuser", "managed"} {
		t.Run(as, func(t *testing.T) {
			name := fmt.Sprintf("flowd_doc_%s_%d", as, os.Getpid())
			runAs := superURL
			if as == "managed" {
				adminRole := name + "_admin"
				admin("CREATE ROLE " + adminRole + " LOGIN CREATEROLE CREATEDB")
				t.Cleanup(func() { admin("DROP ROLE IF EXISTS " + adminRole) })
				runAs = withUser(t, superURL, url.User(adminRole), "postgres")
			}
			t.Cleanup(func() {
				admin("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)")
				admin("DROP ROLE IF EXISTS " + name)
			})
			sql := regexp.MustCompile(`\bflowd\b`).ReplaceAllString(setupSQL, name)
			if err := execAs(ctx, runAs, sql); err != nil {
				t.Fatalf("the documented SQL as %s: %v\n%s", as, err, sql)
			}
			db := withUser(t, superURL, url.UserPassword(name, "change-me"), name)
			for i, want := range []string{"is now at version", "is up to date at version"} {
				e, out, errOut := testEnv(nil)
				code := run(ctx, []string{"migrate", "--db", db}, e)
				if code != 0 || !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "schema of postgres://"+name+":xxxxx@") ||
					strings.Contains(out.String()+errOut.String(), "change-me") {
					t.Fatalf("flowd migrate #%d as the documented role: exit %d, %q %q; want %q and the password redacted", i+1, code, out.String(), errOut.String(), want)
				}
			}
			conn, err := pgx.Connect(ctx, db)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			var super bool
			var owner string
			if err := conn.QueryRow(ctx, `SELECT r.rolsuper, t.tableowner FROM pg_roles r, pg_tables t
				WHERE r.rolname = current_user AND t.tablename = 'workflow_instances'`).Scan(&super, &owner); err != nil {
				t.Fatal(err)
			}
			if super || owner != name {
				t.Errorf("role %s: superuser %v, workflow_instances owned by %s; want a plain role owning the schema", name, super, owner)
			}
		})
	}
}

// execAs runs the statements of sql one by one (CREATE DATABASE cannot
// share a transaction) on a connection to dbURL.
func execAs(ctx context.Context, dbURL, sql string) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	sql = regexp.MustCompile(`(?m)--.*$`).ReplaceAllString(sql, "")
	for _, stmt := range strings.Split(sql, ";") {
		if strings.TrimSpace(stmt) == "" {
			continue
		}
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("%s: %w", strings.TrimSpace(stmt), err)
		}
	}
	return nil
}

// withUser is dbURL with another user and database.
func withUser(t *testing.T, dbURL string, user *url.Userinfo, dbname string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User, u.Path = user, "/"+dbname
	return u.String()
}
