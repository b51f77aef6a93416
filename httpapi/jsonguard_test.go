package httpapi

import (
	"strconv"
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
		`[1e308, -1.7976931348623157e308, 1.7976931348623158e308, 4.9e-324, 2.4703282292062328e-324]`,
		`[0, -0.0, 0e999999, 0.000e-999999, 123456789012345678901234567890, 1e-300, 0.5, -12.5e3]`,
		`{"1e999999":"1e999999"}`, // in strings, not numbers
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
		{`1e999999`, "the number 1e999999 at the top is out of range (a float64 cannot hold its magnitude) at byte 0"},
		{`{"xs":[1, -1e400]}`, "the number -1e400 at /xs/1 is out of range (a float64 cannot hold its magnitude) at byte 10"},
		{`{"a":{"b/c~":[0, 1.7976931348623159e308]}}`, "the number 1.7976931348623159e308 at /a/b~1c~0/1 is out of range"},
		{`{"n":1e-400}`, "the number 1e-400 at /n is out of range"},
		{`{"n":0.000000000000000000001e-310}`, "at /n is out of range"},
		{`{"n":123456789e302}`, "at /n is out of range"},
		{`[1e` + strings.Repeat("9", 100) + `]`, "the number 1e9999999999999999999999999999… at /0 is out of range"},
	}
	for _, c := range bad {
		err := checkJSON([]byte(c.body))
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("checkJSON(%.80q) = %v, want an error containing %q", c.body, err, c.msg)
		}
	}
}

// float64Holds agrees with strconv.ParseFloat, which rounds a number out
// of range to an infinity (with an error) or to zero.
func TestFloat64HoldsAgreesWithParseFloat(t *testing.T) {
	for _, n := range []string{
		"1", "-1", "0.1", "1e308", "1.7976931348623157e308", "1.7976931348623158e308", "1.79769313486231580793e308",
		"1.797693134862315807937289714053034150799e308", "1.7976931348623159e308", "17976931348623159e292", "0.17976931348623159e309",
		"4.9e-324", "2.4703282292062327e-324", "2.4703282292062328e-324", "24703282292062328e-340", "0.00024703282292062328e-320",
		"1e-323", "1e-324", "3e-324", "-3e-324", "1e400", "1e-400", "12345678901234567890123456789e280", "9.99e307",
	} {
		f, err := strconv.ParseFloat(n, 64)
		want := err == nil && f != 0
		if got := float64Holds([]byte(n)); got != want {
			t.Errorf("float64Holds(%s) = %v, ParseFloat gives %v, %v", n, got, f, err)
		}
	}
}

// The guard allocates nothing, however long the body.
func TestCheckJSONAllocatesNothing(t *testing.T) {
	body := []byte(strings.Repeat(`{"a":[`, 30) + `"` + strings.Repeat("ü\\\"", 1000) + `", 1e308, -0.5e-300, 1.7976931348623157e308` + strings.Repeat(`]}`, 30))
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
