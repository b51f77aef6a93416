package pgtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestVersionLess(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"9.6", "15", true},
		{"15", "9.6", false},
		{"15", "16", true},
		{"16", "16", false},
		{"9.5", "9.6", true},
	} {
		if got := versionLess(c.a, c.b); got != c.want {
			t.Errorf("versionLess(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

func TestRemoveStale(t *testing.T) {
	// A pid that surely no longer exists: a child that has exited and been
	// reaped.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skipf("cannot run true: %v", err)
	}
	dead := cmd.Process.Pid

	mk := func(owner, postmaster int) string {
		t.Helper()
		dir, err := os.MkdirTemp(tmpBase, dirPrefix+"*")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
		if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(owner)), 0o644); err != nil {
			t.Fatal(err)
		}
		if postmaster != 0 {
			if err := os.MkdirAll(filepath.Join(dir, "data"), 0o700); err != nil {
				t.Fatal(err)
			}
			pidFile := filepath.Join(dir, "data", "postmaster.pid")
			if err := os.WriteFile(pidFile, []byte(strconv.Itoa(postmaster)+"\n/x\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	stale := mk(dead, dead)
	noServer := mk(dead, 0)
	ownerAlive := mk(os.Getpid(), dead)
	serverAlive := mk(dead, os.Getpid())

	removeStale()

	for dir, wantGone := range map[string]bool{stale: true, noServer: true, ownerAlive: false, serverAlive: false} {
		_, err := os.Stat(dir)
		if gone := os.IsNotExist(err); gone != wantGone {
			t.Errorf("%s: gone = %v, want %v", dir, gone, wantGone)
		}
	}
}

// TestWatchdog checks that a test process that exits without Main (crash,
// timeout) does not leave its cluster running.
func TestWatchdog(t *testing.T) {
	if instance(t).External() {
		t.Skip("no local cluster with an external server")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildExitsWithoutMain$", "-test.count=1")
	cmd.Env = append(os.Environ(), "PGTEST_CHILD_EXIT=1")
	out, _ := cmd.CombinedOutput()
	_, after, ok := strings.Cut(string(out), "BASEDIR=")
	if !ok {
		t.Fatalf("child did not start a cluster; output:\n%s", out)
	}
	dir, _, _ := strings.Cut(after, "\n")
	pid, ok := readPID(filepath.Join(dir, "data", "postmaster.pid"))
	if !ok {
		t.Fatalf("no postmaster.pid in %s after the child exited", dir)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := os.Stat(dir)
		if os.IsNotExist(err) && !processAlive(pid) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("30s after its test process exited, %s exists (%v) or postmaster %d is alive (%v)",
				dir, err == nil, pid, processAlive(pid))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestChildExitsWithoutMain(t *testing.T) {
	if os.Getenv("PGTEST_CHILD_EXIT") == "" {
		t.Skip("run by TestWatchdog")
	}
	fmt.Printf("BASEDIR=%s\n", instance(t).baseDir)
	os.Exit(3) // like a panic or a timeout: Main's cleanup never runs
}
