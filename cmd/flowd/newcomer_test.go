package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// repoRoot is the top of the checkout, where the README's commands run.
var repoRoot = filepath.Join("..", "..")

// buildFlowd builds the flowd binary into a temporary folder, as `go run
// ./cmd/flowd` would.
func buildFlowd(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "flowd")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/flowd: %v\n%s", err, out)
	}
	return bin
}

// startProcess starts a process in the background and stops it (SIGTERM,
// then SIGKILL after 15s) when the test ends; its output goes to out.
func startProcess(t *testing.T, cmd *exec.Cmd, out *syncBuffer) {
	t.Helper()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("%s did not stop within 15s of SIGTERM; output:\n%s", cmd.Args, out.String())
		}
	})
}

// serveBinary runs `flowd serve` from bin on a free port over SQLite in dir
// and returns its URL.
func serveBinary(t *testing.T, bin, dir string) string {
	t.Helper()
	out := &syncBuffer{}
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--db", "sqlite:"+filepath.Join(dir, "flowd.db"))
	cmd.Dir = dir
	startProcess(t, cmd, out)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := urlLine.FindStringSubmatch(out.String()); m != nil {
			return m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("flowd serve did not print its URL within 30s; output:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// readmeNewcomerCommands returns the command lines of the README's
// newcomer block.
func readmeNewcomerCommands(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok1 := strings.Cut(string(b), "<!-- newcomer:start -->")
	block, _, ok2 := strings.Cut(rest, "<!-- newcomer:end -->")
	if !ok1 || !ok2 {
		t.Fatal("README.md has no <!-- newcomer:start --> … <!-- newcomer:end --> block")
	}
	block = strings.TrimSpace(block)
	if !strings.HasPrefix(block, "```sh\n") || !strings.HasSuffix(block, "\n```") {
		t.Fatalf("the newcomer block is not one ```sh code block:\n%s", block)
	}
	var cmds []string
	for _, line := range strings.Split(strings.TrimSuffix(strings.TrimPrefix(block, "```sh\n"), "\n```"), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			cmds = append(cmds, line)
		}
	}
	return cmds
}

// TestReadmeNewcomer runs the README's "Run your own code" commands as a
// newcomer types them, `go run ./cmd/flowd` being the built binary, against
// a real `flowd serve`: the worker line in the background, the last line
// (get) again until the workflow is done. The workflow must complete with
// the greeting, with the Python handler and with the sh one.
func TestReadmeNewcomer(t *testing.T) {
	t.Parallel()
	cmds := readmeNewcomerCommands(t)
	const python, posix = "python3 examples/hello/greet.py", "sh examples/hello/greet.sh"
	if !strings.Contains(strings.Join(cmds, "\n"), python) {
		t.Fatalf("the newcomer block does not run %q:\n%s", python, strings.Join(cmds, "\n"))
	}
	bin := buildFlowd(t)
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, handler := range []string{python, posix} {
		t.Run(strings.Fields(handler)[0], func(t *testing.T) {
			t.Parallel()
			if _, err := exec.LookPath(strings.Fields(handler)[0]); err != nil {
				if os.Getenv("CI") == "" {
					t.Skipf("%s is not installed", strings.Fields(handler)[0])
				}
				t.Fatalf("%s is not installed (CI is set, so this fails instead of skipping)", strings.Fields(handler)[0])
			}
			url := serveBinary(t, bin, t.TempDir())
			env := append(os.Environ(), "FLOWD_SERVER="+url)
			shell := func(line string) *exec.Cmd {
				cmd := exec.Command("sh", "-c", line)
				cmd.Dir, cmd.Env = root, env
				return cmd
			}
			var workerOut syncBuffer
			for i, line := range cmds {
				line = strings.ReplaceAll(line, "go run ./cmd/flowd", shellQuote(bin))
				line = strings.ReplaceAll(line, python, handler)
				if background, ok := strings.CutSuffix(line, "&"); ok {
					startProcess(t, shell("exec "+background), &workerOut)
					continue
				}
				deadline := time.Now().Add(60 * time.Second)
				for {
					out, err := shell(line).CombinedOutput()
					if err != nil {
						t.Fatalf("%s: %v\n%s\nworker output:\n%s", line, err, out, workerOut.String())
					}
					// Only the last line waits for the workflow.
					if i < len(cmds)-1 || strings.Contains(string(out), "COMPLETED") {
						if i == len(cmds)-1 && !strings.Contains(string(out), `{"greeting":"Hello, Ada!"}`) {
							t.Errorf("%s shows no greeting:\n%s", line, out)
						}
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("%s still does not show COMPLETED after 60s:\n%s\nworker output:\n%s", line, out, workerOut.String())
					}
					time.Sleep(100 * time.Millisecond)
				}
			}

			res, err := http.Get(url + "/v1/workflows/hello-1")
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			var inst struct {
				Status string
				State  struct {
					Steps map[string]struct {
						Status string
						Output json.RawMessage
					}
				}
			}
			if err := json.NewDecoder(res.Body).Decode(&inst); err != nil {
				t.Fatal(err)
			}
			greet := inst.State.Steps["greet"]
			var out bytes.Buffer
			_ = json.Compact(&out, greet.Output)
			if inst.Status != "COMPLETED" || greet.Status != "COMPLETED" || out.String() != `{"greeting":"Hello, Ada!"}` {
				t.Errorf("hello-1 is %s, step greet %s with output %s", inst.Status, greet.Status, greet.Output)
			}
		})
	}
}
