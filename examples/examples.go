// Package examples embeds the example workflow definitions of this folder and
// seeds a small demo from them, for `flowd serve --demo` and `flowd demo`.
// It only describes work; applying it goes through a Target.
package examples

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"sort"
)

// Only the definitions at the top of this folder are the demo's: those in
// subfolders (hello/, whose greet handler is the reader's own program) call
// handlers the demo does not have, and would sit RUNNING forever.
//
//go:embed *.yaml
var files embed.FS

// File is one example definition.
type File struct {
	Name string // file name, e.g. "order.yaml"
	Body []byte
}

// Files returns the example definitions in name order.
func Files() []File {
	names, _ := fs.Glob(files, "*.yaml")
	sort.Strings(names)
	out := make([]File, 0, len(names))
	for _, n := range names {
		b, _ := files.ReadFile(n)
		out = append(out, File{Name: n, Body: b})
	}
	return out
}

// Target applies definitions and starts instances: the engine in process, or
// a server through the API.
type Target interface {
	PutDefinition(ctx context.Context, body []byte) error
	Start(ctx context.Context, definition string, input json.RawMessage) (id string, err error)
}

// demoStarts are the instances of the demo: two orders that wait for an
// approval, a fan-out that runs to completion, and an http call that retries
// (nothing listens on its port) until it fails.
var demoStarts = []struct{ definition, input string }{
	{"order", `{"id": "o-1001", "sku": "A-1", "quantity": 2}`},
	{"order", `{"id": "o-1002", "sku": "B-7", "quantity": 1}`},
	{"fanout", `{"batch": "b-42"}`},
	{"http-retry", `{"event": "order.shipped", "order": "o-1001"}`},
}

// Seed applies every example definition and starts the demo instances. It
// returns the ids of the instances it started.
func Seed(ctx context.Context, t Target) ([]string, error) {
	for _, f := range Files() {
		if err := t.PutDefinition(ctx, f.Body); err != nil {
			return nil, fmt.Errorf("applying %s: %w", f.Name, err)
		}
	}
	var ids []string
	for _, s := range demoStarts {
		id, err := t.Start(ctx, s.definition, json.RawMessage(s.input))
		if err != nil {
			return ids, fmt.Errorf("starting %s: %w", s.definition, err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}
