package main

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// Every flag of serve (and migrate) says in --help which environment
// variable sets it, and that is the variable the command reads.
func TestServeHelpNamesEveryEnvVar(t *testing.T) {
	for _, name := range []string{"serve", "migrate"} {
		e, out, _ := testEnv(nil)
		if code := run(context.Background(), []string{name, "--help"}, e); code != 0 {
			t.Fatalf("%s --help: exit %d", name, code)
		}
		lines := strings.Split(out.String(), "\n")
		asked := map[string]bool{}
		cmd := newServeCmd(e)
		if name == "migrate" {
			cmd = newMigrateCmd(e)
		}
		if err := applyEnv(cmd, func(k string) (string, bool) { asked[k] = true; return "", false }); err != nil {
			t.Fatal(err)
		}
		n := 0
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			n++
			want := "(env FLOWD_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_")) + ")"
			flagLine := regexp.MustCompile(`^\s+(-\w, )?--` + regexp.QuoteMeta(f.Name) + `\s`)
			line := ""
			for _, l := range lines {
				if flagLine.MatchString(l) {
					line = l
					break
				}
			}
			if !strings.Contains(line, want) {
				t.Errorf("%s --help: --%s does not say %s: %q", name, f.Name, want, line)
			}
			if v := want[len("(env ") : len(want)-1]; !asked[v] {
				t.Errorf("%s does not read %s for --%s", name, v, f.Name)
			}
		})
		if n < 2 {
			t.Fatalf("%s: only %d flags walked", name, n)
		}
	}
}
