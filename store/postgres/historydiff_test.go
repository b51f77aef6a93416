package postgres

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/flowd/flowd/internal/jsondelta"
	"github.com/flowd/flowd/internal/pgtest"
)

// randomJSON writes a random value: objects with keys of several lengths (so
// that jsonb's key order differs from a bytewise one), arrays, nulls,
// numbers spelled in several ways, strings with escapes.
func randomJSON(r *rand.Rand, depth int) string {
	switch n := r.IntN(9); {
	case n < 3 && depth < 4:
		return randomObjectJSON(r, depth+1)
	case n == 3 && depth < 4:
		var parts []string
		for range r.IntN(3) {
			parts = append(parts, randomJSON(r, depth+1))
		}
		return "[" + strings.Join(parts, ",") + "]"
	case n == 4:
		return "null"
	case n == 5:
		return []string{"1", "1.0", "1.50", "-2e3", "12345678901234567890"}[r.IntN(5)]
	default:
		return []string{`""`, `"x"`, `"é"`, `"a\"b"`, `true`, `false`}[r.IntN(6)]
	}
}

var pgKeys = []string{"a", "b", "bb", "aa", "ccc", "steps", "z", "é", "x\"y"}

func randomObjectJSON(r *rand.Rand, depth int) string {
	seen := map[string]bool{}
	var parts []string
	for range r.IntN(5) {
		k := pgKeys[r.IntN(len(pgKeys))]
		if seen[k] {
			continue
		}
		seen[k] = true
		kb, _ := json.Marshal(k)
		parts = append(parts, string(kb)+":"+randomJSON(r, depth))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// mutateJSON changes some members of the object o, sometimes deep inside.
func mutateJSON(r *rand.Rand, o map[string]any) {
	for range 1 + r.IntN(3) {
		k := pgKeys[r.IntN(len(pgKeys))]
		if sub, ok := o[k].(map[string]any); ok && r.IntN(2) == 0 {
			mutateJSON(r, sub)
			continue
		}
		if r.IntN(3) == 0 {
			delete(o, k)
			continue
		}
		var v any
		dec := json.NewDecoder(strings.NewReader(randomJSON(r, 2)))
		dec.UseNumber()
		_ = dec.Decode(&v)
		o[k] = v
	}
}

// A patch made in Go (jsondelta.Diff over Go's compact JSON, as every
// write makes it) and stored as jsonb turns the state as jsonb writes it
// into the next one exactly, through jsondelta.Apply in order JSONB, as
// History reads it.
func TestHistoryDiffJSONB(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, err := Open(ctx, pgtest.NewDatabase(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(11, 12))
	patched := 0
	for i := range 300 {
		var m map[string]any
		dec := json.NewDecoder(strings.NewReader(randomObjectJSON(r, 0)))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		ob, _ := json.Marshal(m)
		mutateJSON(r, m)
		nb, _ := json.Marshal(m)
		patch, ok, err := jsondelta.Diff(ob, nb, jsondelta.Bytewise)
		if err != nil {
			t.Fatalf("case %d: Diff(%s, %s): %v", i, ob, nb, err)
		}
		if !ok {
			continue // stored whole
		}
		patched++
		var oldText, newText, stored string
		if err := s.pool.QueryRow(ctx, `SELECT $1::jsonb::text, $2::jsonb::text, $3::jsonb::text`, string(ob), string(nb), string(patch)).
			Scan(&oldText, &newText, &stored); err != nil {
			t.Fatalf("case %d (%s → %s): %v", i, ob, nb, err)
		}
		got, err := jsondelta.Apply([]byte(oldText), []byte(stored), jsondelta.JSONB)
		if err != nil {
			t.Fatalf("case %d: Apply(%s, %s): %v", i, oldText, stored, err)
		}
		if want := compact(t, newText); !bytes.Equal(compact(t, string(got)), want) {
			t.Fatalf("case %d: Apply(%s, %s) = %s, want %s", i, oldText, stored, got, want)
		}
	}
	if patched < 200 {
		t.Errorf("only %d of 300 cases made a patch", patched)
	}
}

func compact(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		t.Fatal(fmt.Errorf("%s: %w", s, err))
	}
	return b.Bytes()
}
