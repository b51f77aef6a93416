package workflow

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// aliasBomb is a definition of about 500 KB whose aliases expand it to
// about 500 MB: a 400 KB string named once and repeated 1,250 times.
func aliasBomb() string {
	var b strings.Builder
	b.WriteString("name: bomb\nsteps:\n  - id: a\n    type: task\n    handler: h\n    input:\n      big: &big \"")
	b.WriteString(strings.Repeat("x", 400_000))
	b.WriteString("\"\n      copies: [")
	for i := range 1250 {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("*big")
	}
	b.WriteString("]\n")
	return b.String()
}

// TestYAMLAliasBombIsRefused: the document is refused before anything
// expands it, quickly and without taking the memory.
func TestYAMLAliasBombIsRefused(t *testing.T) {
	doc := aliasBomb()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	_, err := ParseDefinition([]byte(doc))
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrInvalidDefinition) || !strings.Contains(err.Error(), "the YAML document is too large: more than 4194304 bytes once its aliases are expanded") {
		t.Fatalf("error %v", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
		t.Errorf("allocated %d MiB to refuse a %d KB document", alloc>>20, len(doc)>>10)
	}
	if took > 5*time.Second {
		t.Errorf("took %v", took)
	}
}

// TestYAMLAliasesNested: aliases of aliases (each level doubling) are
// measured once per anchor, and a document naming itself is refused.
func TestYAMLAliasesNested(t *testing.T) {
	var b strings.Builder
	b.WriteString("l0: &l0 [\"" + strings.Repeat("x", 100) + "\"]\n")
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&b, "l%d: &l%d [*l%d, *l%d]\n", i, i, i-1, i-1)
	}
	if err := CheckYAMLExpansion([]byte(b.String()), MaxExpandedDocumentBytes); !errors.Is(err, ErrDocumentTooLarge) {
		t.Errorf("40 doublings: %v, want ErrDocumentTooLarge", err)
	}
	// A node naming itself is left to the decoder, which refuses it.
	if _, err := ParseDefinition([]byte("name: x\nsteps: &s [{id: a, type: wait}, *s]\n")); err == nil || !strings.Contains(err.Error(), "anchor 's' value contains itself") {
		t.Errorf("an alias inside its node: %v", err)
	}
}

// TestYAMLAliasesThatFitWork: a definition that uses a few aliases, and one
// whose expansion is just under the bound, still parse.
func TestYAMLAliasesThatFitWork(t *testing.T) {
	def, err := ParseDefinition([]byte(`
name: shared
steps:
  - id: a
    type: task
    handler: h
    retry: &retry {max_attempts: 5, initial_backoff: 2s}
    input: &in {region: eu, tier: gold}
  - id: b
    type: task
    handler: h
    depends_on: [a]
    retry: *retry
    input: *in
`))
	if err != nil {
		t.Fatal(err)
	}
	if string(def.Steps[1].Input) != `{"region":"eu","tier":"gold"}` || def.Steps[1].Retry == nil || def.Steps[1].Retry.MaxAttempts != 5 {
		t.Errorf("step b: input %s, retry %+v", def.Steps[1].Input, def.Steps[1].Retry)
	}
	const bound = 4 << 10
	under := "a: &a \"" + strings.Repeat("x", 1<<10) + "\"\nb: [*a, *a]\n" // 3 KiB expanded
	if err := CheckYAMLExpansion([]byte(under), bound); err != nil {
		t.Errorf("3 KiB expanded: %v", err)
	}
	over := "a: &a \"" + strings.Repeat("x", 1<<10) + "\"\nb: [*a, *a, *a, *a]\n" // 5 KiB
	if err := CheckYAMLExpansion([]byte(over), bound); !errors.Is(err, ErrDocumentTooLarge) {
		t.Errorf("5 KiB expanded: %v, want ErrDocumentTooLarge", err)
	}
}
