package workflow

import (
	"encoding/json"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// TestTemplateRenderIsBounded: a template may name a value many times
// (here 1,000 references to a 100 KB input: 100 MB); rendering stops
// past its bound, in every form, without taking the memory.
func TestTemplateRenderIsBounded(t *testing.T) {
	input := json.RawMessage(`{"big":"` + strings.Repeat("x", 100_000) + `"}`)
	var tree strings.Builder
	tree.WriteString("{")
	for i := range 1_000 {
		if i > 0 {
			tree.WriteString(",")
		}
		tree.WriteString(`"k` + strconv.Itoa(i) + `":"{{ .input.big }}"`)
	}
	tree.WriteString("}")
	obj, err := CompileTemplate(json.RawMessage(tree.String()), noSteps)
	if err != nil {
		t.Fatal(err)
	}
	text, err := CompileStringTemplate(strings.Repeat("{{ .input.big }}", 1_000), noSteps)
	if err != nil {
		t.Fatal(err)
	}
	const want = "the template renders too much: more than 1048576 bytes (--max-state-bytes)"
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err1 := obj.Render(input, nil, 1<<20)
	_, err2 := text.RenderString(input, nil, 1<<20)
	runtime.ReadMemStats(&after)
	for i, err := range []error{err1, err2} {
		if !errors.Is(err, ErrRenderTooLarge) || err.Error() != want {
			t.Errorf("form %d: %v, want %q", i, err, want)
		}
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
		t.Errorf("allocated %d MiB", alloc>>20)
	}
	if out, err := obj.Render(input, nil, 0); err == nil || len(out) > 0 {
		t.Errorf("the default bound (4 MiB) let %d bytes through", len(out))
	}
	small, _ := CompileTemplate(json.RawMessage(`{"a":"{{ .input.big }}","b":"{{ .input.big }}"}`), noSteps)
	if out, err := small.Render(input, nil, 0); err != nil || len(out) < 200_000 {
		t.Errorf("two references: %d bytes, %v", len(out), err)
	}
}
