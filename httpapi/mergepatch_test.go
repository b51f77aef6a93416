package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The examples of RFC 7396, appendix A, and a few of our own.
func TestMergePatchRFC7396(t *testing.T) {
	cases := []struct{ target, patch, want string }{
		{`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
		{`{"a":"b"}`, `{"a":null}`, `{}`},
		{`{"a":"b","b":"c"}`, `{"a":null}`, `{"b":"c"}`},
		{`{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"c"}`, `{"a":["b"]}`, `{"a":["b"]}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
		{`{"a":[{"b":"c"}]}`, `{"a":[1]}`, `{"a":[1]}`},
		{`["a","b"]`, `["c","d"]`, `["c","d"]`},
		{`{"a":"b"}`, `["c"]`, `["c"]`},
		{`{"a":"foo"}`, `null`, `null`},
		{`{"a":"foo"}`, `"bar"`, `"bar"`},
		{`{"e":null}`, `{"a":1}`, `{"e":null,"a":1}`},
		{`[1,2]`, `{"a":"b","c":null}`, `{"a":"b"}`},
		{`{}`, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`},
		// Ours: an absent target, nulls inside arrays kept, numbers kept
		// exactly, a later duplicate key winning as in encoding/json.
		{``, `{"a":{"b":null,"c":1}}`, `{"a":{"c":1}}`},
		{`{"a":1}`, `{"a":[null,{"b":null}]}`, `{"a":[null,{"b":null}]}`},
		{`{"n":1}`, `{"big":9007199254740993,"f":1.10}`, `{"n":1,"big":9007199254740993,"f":1.10}`},
		{`{"a":1}`, `{"a":2,"a":null}`, `{}`},
	}
	for _, c := range cases {
		got, err := mergePatch(json.RawMessage(c.target), json.RawMessage(c.patch))
		if err != nil {
			t.Errorf("mergePatch(%s, %s): %v", c.target, c.patch, err)
			continue
		}
		var g, w any
		dg, dw := json.NewDecoder(bytes.NewReader(got)), json.NewDecoder(strings.NewReader(c.want))
		dg.UseNumber()
		dw.UseNumber()
		if dg.Decode(&g) != nil || dw.Decode(&w) != nil || !reflect.DeepEqual(g, w) {
			t.Errorf("mergePatch(%s, %s) = %s, want %s", c.target, c.patch, got, c.want)
		}
	}
	if _, err := mergePatch(json.RawMessage(`{"a":{`), json.RawMessage(`{"a":{"b":1}}`)); err == nil {
		t.Error("a malformed target should be an error")
	}
}

// A merge patch costs time linear in its size: sixteen times the keys may
// take at most 64 times as long (the fastest of five runs each; linear
// measures about 20 with the garbage collector, and a merge that searches
// the keys it has for every key it adds measures over 250). The merge alone
// is timed, without the database write, so that a loaded machine cannot
// blur the difference.
func TestMergePatchCostIsLinear(t *testing.T) {
	if testing.Short() {
		t.Skip("times merges of 5,000 and 80,000 keys")
	}
	fastest := func(n int) time.Duration {
		patch := json.RawMessage(variablesPatch(n))
		best := time.Duration(1<<63 - 1)
		for range 5 {
			start := time.Now()
			if _, err := mergePatch(json.RawMessage(`{"variables":{}}`), patch); err != nil {
				t.Fatal(err)
			}
			best = min(best, time.Since(start))
		}
		return best
	}
	small, large := fastest(5_000), fastest(80_000)
	ratio := float64(large) / float64(small)
	t.Logf("5,000 keys: %v; 80,000 keys: %v; ratio %.1f", small, large, ratio)
	if ratio > 64 {
		t.Errorf("merging 80,000 keys took %.1f times as long as 5,000 (%v vs %v): more than linear", ratio, large, small)
	}
}

// variablesPatch is a merge patch setting n variables.
func variablesPatch(n int) string {
	var b strings.Builder
	b.WriteString(`{"variables":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":%d`, i, i)
	}
	b.WriteString(`}}`)
	return b.String()
}
