package httpapi

import (
	"strings"
	"testing"
)

func TestParsePrecondition(t *testing.T) {
	valid := map[string]Precondition{
		`*`:              {Any: true},
		` * `:            {Any: true},
		`"3"`:            {Tags: []EntityTag{{Opaque: "3"}}},
		`W/"3"`:          {Tags: []EntityTag{{Weak: true, Opaque: "3"}}},
		`"3", "4"`:       {Tags: []EntityTag{{Opaque: "3"}, {Opaque: "4"}}},
		`"3",W/"4" ,"5"`: {Tags: []EntityTag{{Opaque: "3"}, {Weak: true, Opaque: "4"}, {Opaque: "5"}}},
		`"3", , "4",`:    {Tags: []EntityTag{{Opaque: "3"}, {Opaque: "4"}}},
		`"0abc"`:         {Tags: []EntityTag{{Opaque: "0abc"}}},
		`""`:             {Tags: []EntityTag{{Opaque: ""}}},
	}
	for in, want := range valid {
		got, err := ParsePrecondition(in)
		if err != nil {
			t.Errorf("ParsePrecondition(%q) error: %v", in, err)
			continue
		}
		if got.Any != want.Any || len(got.Tags) != len(want.Tags) {
			t.Errorf("ParsePrecondition(%q) = %+v, want %+v", in, got, want)
			continue
		}
		for i := range got.Tags {
			if got.Tags[i] != want.Tags[i] {
				t.Errorf("ParsePrecondition(%q) tag %d = %+v, want %+v", in, i, got.Tags[i], want.Tags[i])
			}
		}
	}
	// A parseInt(etag) parser accepts several of these; every one is a 400.
	for _, in := range []string{``, ` `, `0`, `3`, `"0`, `W/0`, `w/"3"`, `"1" "2"`, `*, "1"`, `"1", *`, `W/ "3"`, `"a"b`, "\"a\x7fb\"", "\"a b\"", `,`, `12abc`} {
		if _, err := ParsePrecondition(in); err == nil {
			t.Errorf("ParsePrecondition(%q) accepted a malformed value", in)
		} else if !strings.Contains(err.Error(), "malformed entity tag") {
			t.Errorf("ParsePrecondition(%q) error %q does not say what is wrong", in, err)
		}
	}
}

func TestPreconditionMatch(t *testing.T) {
	cases := []struct {
		header  string
		version int64
		strong  bool
		weak    bool
	}{
		{`*`, 7, true, true},
		{`"7"`, 7, true, true},
		{`"6"`, 7, false, false},
		{`W/"7"`, 7, false, true},
		{`"5", "7"`, 7, true, true},
		{`"07"`, 7, false, false},
		{`"7abc"`, 7, false, false},
		{`"0abc"`, 0, false, false},
		{`"0"`, 0, true, true},
	}
	for _, c := range cases {
		p, err := ParsePrecondition(c.header)
		if err != nil {
			t.Fatalf("%q: %v", c.header, err)
		}
		if got := p.MatchStrong(c.version); got != c.strong {
			t.Errorf("%q strong-matches version %d = %v, want %v", c.header, c.version, got, c.strong)
		}
		if got := p.MatchWeak(c.version); got != c.weak {
			t.Errorf("%q weak-matches version %d = %v, want %v", c.header, c.version, got, c.weak)
		}
	}
	if ETag(42) != `"42"` {
		t.Errorf("ETag(42) = %s", ETag(42))
	}
}

// FuzzParsePrecondition: never panics; whatever parses re-serialises to a value
// that parses to the same thing.
func FuzzParsePrecondition(f *testing.F) {
	for _, s := range []string{`*`, `"3"`, `W/"3"`, `"1", "2"`, `"1" "2"`, `*, "1"`, `W/0`, `"0`, "\"\x80\""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePrecondition(s)
		if err != nil {
			return
		}
		if p.Any {
			if len(p.Tags) != 0 {
				t.Fatalf("%q: * with tags", s)
			}
			return
		}
		var parts []string
		for _, tag := range p.Tags {
			if strings.Contains(tag.Opaque, `"`) {
				t.Fatalf("%q: opaque tag %q contains a quote", s, tag.Opaque)
			}
			w := ""
			if tag.Weak {
				w = "W/"
			}
			parts = append(parts, w+`"`+tag.Opaque+`"`)
		}
		again, err := ParsePrecondition(strings.Join(parts, ", "))
		if err != nil || len(again.Tags) != len(p.Tags) {
			t.Fatalf("%q: re-serialised form does not parse back: %v", s, err)
		}
		for i := range p.Tags {
			if again.Tags[i] != p.Tags[i] {
				t.Fatalf("%q: tag %d changed on round trip", s, i)
			}
		}
	})
}
