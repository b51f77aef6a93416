package main

import (
	"strings"

	"github.com/spf13/pflag"
)

// envName is the environment variable applyEnv reads for the flag name:
// FLOWD_ and the name in upper case with - as _ (token-file: FLOWD_TOKEN_FILE).
func envName(flag string) string {
	return "FLOWD_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// markEnv ends the help text of every flag in fs with the environment
// variable that sets it, so --help tells each one, and a flag added later
// cannot be left out.
func markEnv(fs *pflag.FlagSet) {
	fs.VisitAll(func(f *pflag.Flag) {
		f.Usage += " (env " + envName(f.Name) + ")"
	})
}
