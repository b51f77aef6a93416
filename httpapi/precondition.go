package httpapi

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// EntityTag is one RFC 9110 entity tag: W/"opaque" when Weak.
type EntityTag struct {
	Weak   bool
	Opaque string // without the quotes
}

// Precondition is a parsed If-Match or If-None-Match value: "*" or a list.
type Precondition struct {
	Any  bool
	Tags []EntityTag
}

var errMalformedTag = errors.New("malformed entity tag")

// ParsePrecondition parses an If-Match / If-None-Match field value by RFC 9110
// §13.1.1: `*`, or a comma-separated list of entity tags (`"3"`, `W/"3"`) with
// optional whitespace; empty list elements are ignored as §5.6.1 requires.
// Anything else — `0`, `"0`, `W/0`, `"1" "2"`, `*, "1"`, an empty value — is an
// error, so the caller answers 400 instead of guessing.
func ParsePrecondition(value string) (Precondition, error) {
	v := strings.Trim(value, " \t")
	if v == "*" {
		return Precondition{Any: true}, nil
	}
	var p Precondition
	for len(v) > 0 {
		v = strings.TrimLeft(v, " \t")
		if v == "" {
			break
		}
		if v[0] == ',' {
			v = v[1:]
			continue
		}
		tag, rest, err := parseEntityTag(v)
		if err != nil {
			return Precondition{}, fmt.Errorf("%w in %q: %w", errMalformedTag, value, err)
		}
		p.Tags = append(p.Tags, tag)
		rest = strings.TrimLeft(rest, " \t")
		if rest != "" && rest[0] != ',' {
			return Precondition{}, fmt.Errorf("%w in %q: entity tags must be separated by commas", errMalformedTag, value)
		}
		v = rest
	}
	if len(p.Tags) == 0 {
		return Precondition{}, fmt.Errorf("%w: %q holds no entity tag (want * or a list like \"3\")", errMalformedTag, value)
	}
	return p, nil
}

// parseEntityTag reads one entity tag from the front of s.
func parseEntityTag(s string) (EntityTag, string, error) {
	var t EntityTag
	if strings.HasPrefix(s, "W/") {
		t.Weak = true
		s = s[2:]
	}
	if s == "" || s[0] != '"' {
		return t, "", errors.New(`an entity tag is a quoted string such as "3" or W/"3"`)
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			t.Opaque = s[1:i]
			return t, s[i+1:], nil
		case c == 0x21 || (c >= 0x23 && c <= 0x7e) || c >= 0x80:
		default:
			return t, "", fmt.Errorf("character %q is not allowed inside an entity tag", c)
		}
	}
	return t, "", errors.New("unterminated entity tag")
}

// MatchStrong reports whether p matches the current version under the strong
// comparison If-Match uses: `*` matches, a weak tag never does, and a strong tag
// matches when its content is exactly the version's decimal form.
func (p Precondition) MatchStrong(version int64) bool {
	if p.Any {
		return true
	}
	cur := strconv.FormatInt(version, 10)
	for _, t := range p.Tags {
		if !t.Weak && t.Opaque == cur {
			return true
		}
	}
	return false
}

// MatchWeak reports whether p matches under the weak comparison that
// If-None-Match uses: W/"3" and "3" both match version 3.
func (p Precondition) MatchWeak(version int64) bool {
	if p.Any {
		return true
	}
	cur := strconv.FormatInt(version, 10)
	for _, t := range p.Tags {
		if t.Opaque == cur {
			return true
		}
	}
	return false
}
