package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

func newVersionCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of flowd",
		Long: `version prints the version of this flowd binary: its module version
("(devel)" when built in a checkout), the commit it was built from when the
build recorded one ("(modified)" when the checkout had uncommitted changes),
and the Go version and platform it was built with. flowd --version prints the
same line.`,
		Args: exactArgs(),
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintf(e.stdout, "flowd %s\n", buildVersion())
			return err
		},
	}
}

// buildVersion describes this binary, from what the Go toolchain recorded in
// it.
func buildVersion() string {
	info, _ := debug.ReadBuildInfo()
	return versionOf(info)
}

// versionOf is the version line of a binary built as info says (nil: no
// build information).
func versionOf(info *debug.BuildInfo) string {
	version, goVersion := "(devel)", runtime.Version()
	var revision, modified string
	if info != nil {
		if v := info.Main.Version; v != "" {
			version = v
		}
		if info.GoVersion != "" {
			goVersion = info.GoVersion
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					modified = " (modified)"
				}
			}
		}
	}
	line := version
	if revision != "" {
		line += " revision " + revision + modified
	}
	return fmt.Sprintf("%s %s %s/%s", line, goVersion, runtime.GOOS, runtime.GOARCH)
}
