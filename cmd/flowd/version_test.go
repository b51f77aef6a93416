package main

import (
	"context"
	"runtime"
	"runtime/debug"
	"testing"
)

// flowd version and flowd --version print the same line: in a test binary,
// built from a checkout, the version is "(devel)".
func TestVersion(t *testing.T) {
	t.Parallel()
	want := "flowd (devel) " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	for _, args := range [][]string{{"version"}, {"--version"}} {
		e, out, errOut := testEnv(nil)
		if code := run(context.Background(), args, e); code != exitOK || out.String() != want || errOut.String() != "" {
			t.Errorf("flowd %s: exit %d, stdout %q, stderr %q; want %q", args[0], code, out.String(), errOut.String(), want)
		}
	}
	e, _, errOut := testEnv(nil)
	if code := run(context.Background(), []string{"version", "extra"}, e); code != exitUsage || errOut.String() == "" {
		t.Errorf("flowd version extra: exit %d, stderr %q", code, errOut.String())
	}
}

func TestVersionOf(t *testing.T) {
	t.Parallel()
	platform := " " + runtime.GOOS + "/" + runtime.GOARCH
	for _, c := range []struct {
		info *debug.BuildInfo
		want string
	}{
		{nil, "(devel) " + runtime.Version() + platform},
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.4.0"}}, "v1.4.0 go1.26.8" + platform},
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "99093fd1c2e4"}, {Key: "vcs.modified", Value: "true"},
		}}, "(devel) revision 99093fd1c2e4 (modified) go1.26.8" + platform},
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.4.1-0.20261125060000-99093fd1c2e4"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "99093fd1c2e4"}, {Key: "vcs.modified", Value: "false"},
		}}, "v1.4.1-0.20261125060000-99093fd1c2e4 revision 99093fd1c2e4 go1.26.8" + platform},
	} {
		if got := versionOf(c.info); got != c.want {
			t.Errorf("versionOf(%+v) = %q, want %q", c.info, got, c.want)
		}
	}
}
