package httpapi

import (
	"strings"
	"testing"
)

func TestCheckJSON(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	ok := []string{
		``, `{}`, `{"a":[1,{"b":null}]}`, deep(MaxJSONDepth),
		`{"a":"` + strings.Repeat("[", 100) + `"}`, // brackets in a string do not nest
		`{"a":"\"[[[["}`,            // nor after an escaped quote
		`{"a":"\\u0000"}`,           // a backslash, then u0000
		`{"a":"\u0001"}`,            // other control characters may be escaped
		`{"é":"ü, 漢字, 😀"}`,          // UTF-8
		`{"a":"\ud800"}`,            // a lone surrogate escape decodes to U+FFFD
		`]]]]` + deep(MaxJSONDepth), // malformed: the decoder reports it
		`{"a":"unterminated`,        // likewise
		`{"a":"x\`,                  // likewise
	}
	for _, b := range ok {
		if err := checkJSON([]byte(b)); err != nil {
			t.Errorf("checkJSON(%.80q) = %v, want nil", b, err)
		}
	}
	bad := []struct{ body, msg string }{
		{deep(MaxJSONDepth + 1), "JSON nested deeper than 64 levels at byte 64"},
		{`{"a":` + deep(MaxJSONDepth) + `}`, "JSON nested deeper than 64 levels at byte 68"},
		{deep(5000), "JSON nested deeper than 64 levels at byte 64"},
		{"{\"a\":\"x\xffy\"}", "invalid UTF-8 in a string at byte 7"},
		{"{\"k\xc3\":1}", "invalid UTF-8 in a string at byte 3"},
		{"{\"a\":1}\xff", "invalid UTF-8 at byte 7"},
		{"{\"a\":\"\xed\xa0\x80\"}", "invalid UTF-8 in a string at byte 6"}, // an encoded surrogate
		{`{"a":"x\u0000"}`, `a string holds the escape \u0000 (NUL), which cannot be stored, at byte 7`},
		{`{"\u0000":1}`, `escape \u0000 (NUL), which cannot be stored, at byte 2`},
		{`{"a":"\\\u0000"}`, `at byte 8`},
	}
	for _, c := range bad {
		err := checkJSON([]byte(c.body))
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("checkJSON(%.80q) = %v, want an error containing %q", c.body, err, c.msg)
		}
	}
}

// The guard allocates nothing, however long the body.
func TestCheckJSONAllocatesNothing(t *testing.T) {
	body := []byte(strings.Repeat(`{"a":[`, 30) + `"` + strings.Repeat("ü\\\"", 1000) + `"` + strings.Repeat(`]}`, 30))
	if err := checkJSON(body); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(10, func() { _ = checkJSON(body) }); n != 0 {
		t.Errorf("checkJSON allocated %v times", n)
	}
}

func FuzzCheckJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1]}`, `"\u0000"`, "\"\xff\"", `[[[[`, `"\\"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		err := checkJSON(b)
		if err != nil && !strings.Contains(err.Error(), "at byte ") {
			t.Fatalf("checkJSON(%q) = %v: the error should say where", b, err)
		}
	})
}
