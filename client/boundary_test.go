package client_test

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The client and the worker SDK are for programs that talk to a server:
// they must link none of it (engine, stores, definitions and their
// expression language, the HTTP server, metrics). clientSide lists every
// package of ours such a program may link; heavy lists third-party modules
// that only the server needs.
var (
	clientPrograms = []string{
		"github.com/flowd/flowd/client",
		"github.com/flowd/flowd/worker",
		"github.com/flowd/flowd/examples/go-worker",
		"github.com/flowd/flowd/examples/code-saga",
		"github.com/flowd/flowd/examples/code-sleep-event",
	}
	clientSide = []string{
		"github.com/flowd/flowd/api",
		"github.com/flowd/flowd/client",
		"github.com/flowd/flowd/examples/code-saga",
		"github.com/flowd/flowd/examples/code-sleep-event",
		"github.com/flowd/flowd/examples/go-worker",
		"github.com/flowd/flowd/tracing/traceparent",
		"github.com/flowd/flowd/worker",
		"github.com/flowd/flowd/worker/task",
		"github.com/flowd/flowd/workflow/instance",
	}
	heavy = []string{
		"github.com/jackc/", "modernc.org/", "github.com/santhosh-tekuri/jsonschema",
		"github.com/prometheus/", "go.yaml.in/", "gopkg.in/yaml", "github.com/itchyny/",
		"go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters", "google.golang.org/grpc",
		"github.com/spf13/cobra", "github.com/pressly/goose",
	}
)

// TestClientLinksNoServer fails when the client, the worker or the Go
// worker examples depend on a package of the server.
func TestClientLinksNoServer(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the go command is needed to check the client's dependencies: %v", err)
		}
		t.Skipf("no go command: %v", err)
	}
	for _, pkg := range clientPrograms {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		for dep := range strings.FieldsSeq(string(out)) {
			if strings.HasPrefix(dep, "github.com/flowd/flowd") && !slices.Contains(clientSide, dep) {
				t.Errorf("%s depends on %s, a package of the server", pkg, dep)
			}
			for _, h := range heavy {
				if strings.HasPrefix(dep, h) {
					t.Errorf("%s depends on %s, which only the server needs", pkg, dep)
				}
			}
		}
	}
}
