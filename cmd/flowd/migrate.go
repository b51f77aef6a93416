package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/flowd/flowd/internal/dsn"
	"github.com/flowd/flowd/internal/storeopen"
)

func newMigrateCmd(e *env) *cobra.Command {
	var db, output string
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Create or upgrade the database schema",
		Long: `migrate applies the schema migrations embedded in this binary that the
database does not have yet, and says what it did. It is idempotent and safe to run
from several nodes at once. flowd serve runs it on start as well.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			s, err := storeopen.Open(cmd.Context(), db, storeopen.Options{})
			if err != nil {
				return err
			}
			defer s.Close()
			rep, err := s.Migrate(cmd.Context())
			if err != nil {
				return fmt.Errorf("migrating %s: %w", dsn.Redact(db), err)
			}
			if output == "json" {
				type applied struct {
					Version    int64   `json:"version"`
					Name       string  `json:"name"`
					DurationMS float64 `json:"duration_ms"`
				}
				out := struct {
					Database string    `json:"database"`
					Applied  []applied `json:"applied"`
					Version  int64     `json:"version"`
				}{Database: dsn.Redact(db), Applied: []applied{}, Version: rep.Version}
				for _, m := range rep.Applied {
					out.Applied = append(out.Applied, applied{m.Version, m.Name, float64(m.Duration.Microseconds()) / 1000})
				}
				return json.NewEncoder(e.stdout).Encode(out)
			}
			for _, m := range rep.Applied {
				fmt.Fprintf(e.stdout, "applied %s (version %d) in %s\n", m.Name, m.Version, m.Duration.Round(100_000))
			}
			if len(rep.Applied) == 0 {
				fmt.Fprintf(e.stdout, "schema of %s is up to date at version %d\n", dsn.Redact(db), rep.Version)
			} else {
				fmt.Fprintf(e.stdout, "schema of %s is now at version %d\n", dsn.Redact(db), rep.Version)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&db, "db", storeopen.DefaultURL, "database URL: postgres://… or sqlite:PATH")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	markEnv(cmd.Flags())
	return cmd
}

func checkOutput(o string) error {
	if o != "text" && o != "json" {
		return usageError("--output must be text or json, not %q", o)
	}
	return nil
}
