package sw

import (
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// schemaDoc is a workflow whose input must match schema (YAML).
func schemaDoc(schema string) string {
	return ctkHead + "input:\n  schema:\n    format: json\n    document:\n" + schema + "do:\n  - a:\n      set:\n        ok: true\n"
}

// startCost starts the workflow of doc with input and returns the fault,
// the time and the bytes allocated.
func startCost(t *testing.T, doc, input string) (*Error, time.Duration, uint64) {
	t.Helper()
	w, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	_, st, err := w.Start(Env{Now: t0}, []byte(input))
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	return st.Fault, took, after.TotalAlloc - before.TotalAlloc
}

// TestSchemaRefusesHugeNumbers: a number a float64 cannot hold is refused
// before the validator reads it as an exact rational (2,000 of 1e999999
// against an integer schema took 41 s of CPU).
func TestSchemaRefusesHugeNumbers(t *testing.T) {
	doc := schemaDoc("      type: object\n      properties:\n        xs: {type: array, items: {type: integer}}\n")
	input := `{"xs": [` + strings.Repeat("1e999999, ", 1999) + `1e999999]}`
	f, took, _ := startCost(t, doc, input)
	want := "input.schema: at /xs/0: the number 1e999999 is too large to validate (at most 1000 digits and an exponent of ±1000)"
	if f == nil || f.Detail != want || f.Instance != "/input/schema" {
		t.Errorf("fault %+v, want detail %q", f, want)
	}
	if took > 2*time.Second {
		t.Errorf("took %v", took)
	}
	if f, _, _ := startCost(t, doc, `{"xs": [1, 2e3, -1e300]}`); f != nil {
		t.Errorf("numbers a float64 holds: %+v", f)
	}
}

// TestSchemaFailuresOfALargeValue: a large value failing at every element
// is refused without listing (and allocating) every failure; a small one
// lists them; a large valid one passes.
func TestSchemaFailuresOfALargeValue(t *testing.T) {
	doc := schemaDoc("      type: object\n      properties:\n        xs: {type: array, items: {type: string}}\n")
	f, _, alloc := startCost(t, doc, `{"xs": [`+strings.Repeat("1,", 200_000)+`1]}`)
	if f == nil || !strings.HasPrefix(f.Detail, "input.schema: the value (200004 parts) does not match the schema; failures are listed for smaller values only") {
		t.Errorf("fault %+v", f)
	}
	if alloc > 128<<20 {
		t.Errorf("allocated %d MiB", alloc>>20)
	}
	if f, _, _ := startCost(t, doc, `{"xs": ["a", 1]}`); f == nil || f.Detail != "input.schema: at /xs/1: got number, want string" {
		t.Errorf("small value: %+v", f)
	}
	if f, _, _ := startCost(t, doc, `{"xs": [`+strings.Repeat(`"a",`, 200_000)+`"a"]}`); f != nil {
		t.Errorf("a large valid value: %+v", f)
	}
}

// TestSchemaWorkIsBounded: a value whose size times the schema's passes
// the bound is refused, saying so.
func TestSchemaWorkIsBounded(t *testing.T) {
	var props strings.Builder
	for i := range 2000 {
		props.WriteString("        p" + strconv.Itoa(i) + ": {type: string, minLength: 1}\n")
	}
	doc := schemaDoc("      type: object\n      properties:\n" + props.String())
	f, _, _ := startCost(t, doc, `{"xs": [`+strings.Repeat("1,", 20_000)+`1]}`)
	if f == nil || !strings.Contains(f.Detail, "the value is too large to validate: 20004 parts against a schema of") {
		t.Errorf("fault %+v", f)
	}
}

// TestSchemaPatternsAreBounded: a pattern whose program would be too
// large is a problem of the document, as in a runtime expression.
func TestSchemaPatternsAreBounded(t *testing.T) {
	_, err := Parse([]byte(schemaDoc("      type: string\n      pattern: '" + strings.Repeat("(a{1000})", 20) + "'\n")))
	if err == nil || !strings.Contains(err.Error(), "/input/schema/document") || !strings.Contains(err.Error(), "compiling a regular expression would take about") {
		t.Errorf("a pattern of 20,000 instructions: %v", err)
	}
}
