package jsondelta

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

func TestDiffApply(t *testing.T) {
	tests := []struct {
		name, old, new, patch string
	}{
		{"same", `{"a":1}`, `{"a":1}`, `{}`},
		{"empty objects", `{}`, `{}`, `{}`},
		{"add key", `{"a":1}`, `{"a":1,"b":2}`, `{"s":{"b":2}}`},
		{"delete key", `{"a":1,"b":2}`, `{"a":1}`, `{"d":["b"]}`},
		{"set to null", `{"a":1}`, `{"a":null}`, `{"s":{"a":null}}`},
		{"null to value", `{"a":null}`, `{"a":[1]}`, `{"s":{"a":[1]}}`},
		{"add null", `{}`, `{"a":null}`, `{"s":{"a":null}}`},
		{"array replaced whole", `{"a":[1,2,3]}`, `{"a":[1,2]}`, `{"s":{"a":[1,2]}}`},
		{"nested change", `{"a":{"b":{"c":1,"d":2}}}`, `{"a":{"b":{"c":1,"d":3}}}`, `{"m":{"a":{"m":{"b":{"s":{"d":3}}}}}}`},
		{"nested null kept", `{"a":{"x":1}}`, `{"a":{"x":1,"y":{"z":null}}}`, `{"m":{"a":{"s":{"y":{"z":null}}}}}`},
		{"object becomes scalar", `{"a":{"x":1}}`, `{"a":"x"}`, `{"s":{"a":"x"}}`},
		{"scalar becomes object", `{"a":1}`, `{"a":{"b":null}}`, `{"s":{"a":{"b":null}}}`},
		{"number spelling is a change", `{"a":1}`, `{"a":1.0}`, `{"s":{"a":1.0}}`},
		{"string escape is a change", `{"a":"é"}`, `{"a":"\u00e9"}`, `{"s":{"a":"\u00e9"}}`},
		{"insert sorted", `{"a":1,"c":3}`, `{"a":1,"b":2,"c":3}`, `{"s":{"b":2}}`},
		{"append to unsorted", `{"z":1,"a":2}`, `{"z":1,"a":2,"m":3}`, `{"s":{"m":3}}`},
		{"unsorted insertion sets the object whole", `{"o":{"a":1,"c":3}}`, `{"o":{"a":1,"c":3,"b":2}}`, `{"s":{"o":{"a":1,"c":3,"b":2}}}`},
		{"delete, change and add", `{"a":1,"b":{"x":1},"c":3}`, `{"b":{"x":2},"c":3,"d":4}`, `{"d":["a"],"m":{"b":{"s":{"x":2}}},"s":{"d":4}}`},
		{"duplicate keys set whole", `{"o":{"a":1,"a":2}}`, `{"o":{"a":1,"a":3}}`, `{"s":{"o":{"a":1,"a":3}}}`},
		{"escaped key", `{"a\"b":1}`, `{"a\"b":2,"c\\d":null}`, `{"s":{"a\"b":2,"c\\d":null}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			patch, ok, err := Diff([]byte(tt.old), []byte(tt.new), Bytewise)
			if err != nil || !ok {
				t.Fatalf("Diff = %v, %v", ok, err)
			}
			if string(patch) != tt.patch {
				t.Errorf("Diff = %s, want %s", patch, tt.patch)
			}
			got, err := Apply([]byte(tt.old), patch, Bytewise)
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if string(got) != tt.new {
				t.Errorf("Apply = %s, want %s", got, tt.new)
			}
		})
	}
}

// A top-level key order that Apply cannot produce is refused, so that the
// caller stores the state whole.
func TestDiffTopLevelOrder(t *testing.T) {
	_, ok, err := Diff([]byte(`{"a":1,"c":3}`), []byte(`{"a":1,"c":3,"b":2}`), Bytewise)
	if err != nil || ok {
		t.Fatalf("Diff = %v, %v; want not ok", ok, err)
	}
}

// Patches as PostgreSQL writes them (jsonb key order and spacing) apply
// with Order JSONB.
func TestApplyJSONB(t *testing.T) {
	doc := `{"b": 1, "aa": {"x": null}, "ccc": [1, 2]}`
	patch := `{"d": ["b"], "m": {"aa": {"s": {"y": {}, "zz": null}}}, "s": {"c": "new", "dddd": 4}}`
	got, err := Apply([]byte(doc), []byte(patch), JSONB)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"c":"new","aa":{"x":null,"y":{},"zz":null},"ccc":[1, 2],"dddd":4}`; string(got) != want {
		t.Errorf("Apply = %s, want %s", got, want)
	}
}

func TestApplyErrors(t *testing.T) {
	tests := []struct{ name, doc, patch string }{
		{"not JSON", `{"a":1}`, `{"s":`},
		{"patch not an object", `{"a":1}`, `[1]`},
		{"unknown member", `{"a":1}`, `{"x":{}}`},
		{"delete missing key", `{"a":1}`, `{"d":["b"]}`},
		{"delete list not strings", `{"a":1}`, `{"d":[1]}`},
		{"change missing key", `{"a":1}`, `{"m":{"b":{}}}`},
		{"change a scalar as an object", `{"a":1}`, `{"m":{"a":{"s":{"x":1}}}}`},
		{"document not an object", `[1]`, `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := Apply([]byte(tt.doc), []byte(tt.patch), Bytewise); err == nil {
				t.Fatalf("Apply = %s, want an error", got)
			}
		})
	}
	if _, _, err := Diff([]byte(`[1]`), []byte(`{}`), Bytewise); err == nil {
		t.Error("Diff of an array: want an error")
	}
	if _, _, err := Diff([]byte(`{}`), []byte(`{`), Bytewise); err == nil {
		t.Error("Diff of invalid JSON: want an error")
	}
}

// randomValue writes a random JSON value: nested objects (sorted keys or
// not), arrays, nulls, numbers in several spellings, strings with escapes.
func randomValue(r *rand.Rand, depth int) string {
	switch n := r.IntN(10); {
	case n < 3 && depth < 4:
		return randomObject(r, depth+1, r.IntN(3) > 0)
	case n == 3 && depth < 4:
		var parts []string
		for range r.IntN(4) {
			parts = append(parts, randomValue(r, depth+1))
		}
		return "[" + strings.Join(parts, ",") + "]"
	case n == 4:
		return "null"
	case n == 5:
		return []string{"0", "1", "1.0", "-2e3", "12345678901234567890"}[r.IntN(5)]
	case n == 6:
		return []string{"true", "false"}[r.IntN(2)]
	default:
		return strconv.Quote([]string{"", "x", "é", "a\"b", "<&>", "line\nbreak"}[r.IntN(6)])
	}
}

var keyPool = []string{"a", "b", "c", "aa", "ab", "steps", "variables", "x\"y", "é", "z"}

func randomObject(r *rand.Rand, depth int, sorted bool) string {
	keys := map[string]bool{}
	for range r.IntN(6) {
		keys[keyPool[r.IntN(len(keyPool))]] = true
	}
	var ks []string
	for k := range keys {
		ks = append(ks, k)
	}
	if sorted {
		sortStrings(ks)
	}
	var parts []string
	for _, k := range ks {
		b, _ := json.Marshal(k)
		parts = append(parts, string(b)+":"+randomValue(r, depth))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func sortStrings(ks []string) {
	for i := 1; i < len(ks); i++ {
		for j := i; j > 0 && ks[j] < ks[j-1]; j-- {
			ks[j], ks[j-1] = ks[j-1], ks[j]
		}
	}
}

// mutate changes a random part of the object text doc: adds, deletes or
// replaces keys at some depth.
func mutate(r *rand.Rand, doc string) string {
	var v any
	dec := json.NewDecoder(strings.NewReader(doc))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		panic(err)
	}
	m := v.(map[string]any)
	for range 1 + r.IntN(3) {
		target := m
		for target != nil && r.IntN(2) == 0 {
			var next map[string]any
			for _, x := range target {
				if o, ok := x.(map[string]any); ok {
					next = o
					break
				}
			}
			if next == nil {
				break
			}
			target = next
		}
		k := keyPool[r.IntN(len(keyPool))]
		if r.IntN(3) == 0 {
			delete(target, k)
		} else {
			var nv any
			_ = json.Unmarshal([]byte(randomValue(r, 2)), &nv)
			target[k] = nv
		}
	}
	b, _ := json.Marshal(m) // sorted keys, as the stores' encoder
	return string(b)
}

func FuzzDiffApply(f *testing.F) {
	f.Add(uint64(1), uint64(2))
	f.Add(uint64(42), uint64(7))
	f.Fuzz(func(t *testing.T, s1, s2 uint64) {
		r := rand.New(rand.NewPCG(s1, s2))
		old := randomObject(r, 0, r.IntN(2) == 0)
		var news []string
		news = append(news, randomObject(r, 0, true), mutate(r, old), mutate(r, mutate(r, old)))
		for _, nw := range news {
			patch, ok, err := Diff([]byte(old), []byte(nw), Bytewise)
			if err != nil {
				t.Fatalf("Diff(%s, %s): %v", old, nw, err)
			}
			if !ok {
				continue // top-level order not reproducible: stored whole
			}
			got, err := Apply([]byte(old), patch, Bytewise)
			if err != nil {
				t.Fatalf("Apply(%s, %s): %v", old, patch, err)
			}
			if !bytes.Equal(got, []byte(nw)) {
				t.Fatalf("Apply(%s, Diff → %s) = %s, want %s", old, patch, got, nw)
			}
		}
	})
}

// Sorted documents (what the stores write) always have a patch.
func TestDiffSortedAlwaysOK(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		old := mutate(r, randomObject(r, 0, true))
		nw := mutate(r, old)
		patch, ok, err := Diff([]byte(old), []byte(nw), Bytewise)
		if err != nil || !ok {
			t.Fatalf("Diff(%s, %s) = %v, %v", old, nw, ok, err)
		}
		got, err := Apply([]byte(old), patch, Bytewise)
		if err != nil || string(got) != nw {
			t.Fatalf("Apply(%s, %s) = %s, %v; want %s", old, patch, got, err, nw)
		}
	}
}
