package instance

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Search attributes are named values stored indexed beside an instance, so
// that a list can find the instances of, say, one customer without reading
// their states. A value is a string, a number or a boolean; a list compares
// it as text (SearchText).

// MaxSearchAttributes bounds the search attributes of one instance (those
// its definition renders and those its start or its code add, together),
// and those a definition declares.
const MaxSearchAttributes = 16

// MaxSearchValueBytes bounds a value's text: each is a key of an index.
const MaxSearchValueBytes = 512

// ErrInvalidSearch is wrapped by every problem with a search attribute's
// name or value.
var ErrInvalidSearch = errors.New("invalid search attribute")

// ValidateSearchName checks a search attribute's name: [a-z][a-z0-9_]{0,62}.
func ValidateSearchName(name string) error {
	if name == "" || len(name) > 63 {
		return fmt.Errorf("%w: name %q must be 1–63 characters", ErrInvalidSearch, truncate(name))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z':
		case i > 0 && (c >= '0' && c <= '9' || c == '_'):
		default:
			return fmt.Errorf("%w: name %q must start with a lowercase letter and hold only a-z, 0-9 and _", ErrInvalidSearch, truncate(name))
		}
	}
	return nil
}

// SearchKind is the JSON type of a search attribute's value.
type SearchKind string

// The kinds of value.
const (
	SearchString  SearchKind = "string"
	SearchNumber  SearchKind = "number"
	SearchBoolean SearchKind = "boolean"
)

// SearchText is the text a list compares a value with, and its kind: a
// string as it is, a number or a boolean as JSON writes it (a number in
// its shortest form: 42.0 is 42). Anything else, or a string longer than
// MaxSearchValueBytes or not UTF-8 without NUL, is ErrInvalidSearch.
func SearchText(name string, v json.RawMessage) (string, SearchKind, error) {
	v = bytes.TrimSpace(v)
	switch {
	case len(v) == 0:
		return "", "", fmt.Errorf("%w: %s has no value", ErrInvalidSearch, name)
	case string(v) == "true" || string(v) == "false":
		return string(v), SearchBoolean, nil
	case v[0] == '"':
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return "", "", fmt.Errorf("%w: %s: %w", ErrInvalidSearch, name, err)
		}
		if len(s) > MaxSearchValueBytes {
			return "", "", fmt.Errorf("%w: %s is %d bytes long, at most %d", ErrInvalidSearch, name, len(s), MaxSearchValueBytes)
		}
		if !utf8.ValidString(s) || bytes.IndexByte([]byte(s), 0) >= 0 {
			return "", "", fmt.Errorf("%w: %s is not UTF-8 text without NUL characters", ErrInvalidSearch, name)
		}
		return s, SearchString, nil
	case v[0] == '-' || v[0] >= '0' && v[0] <= '9':
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil || !json.Valid(v) {
			return "", "", fmt.Errorf("%w: %s is not a number JSON can hold", ErrInvalidSearch, name)
		}
		b, _ := json.Marshal(f)
		return string(b), SearchNumber, nil
	}
	return "", "", fmt.Errorf("%w: %s must be a string, a number or a boolean, not %s", ErrInvalidSearch, name, truncate(string(v)))
}

// SearchJSON is the JSON value of a stored text and kind (SearchText's
// inverse).
func SearchJSON(text string, kind SearchKind) json.RawMessage {
	if kind == SearchString {
		b, _ := json.Marshal(text)
		return b
	}
	return json.RawMessage(text)
}

// SearchValue is one attribute as stored: its name, its text and kind.
type SearchValue struct {
	Name string
	Text string
	Kind SearchKind
}

// CheckSearch validates attrs (names, values, how many) and returns them as
// stored, sorted by name; nil for none.
func CheckSearch(attrs map[string]json.RawMessage) ([]SearchValue, error) {
	if len(attrs) == 0 {
		return nil, nil
	}
	if len(attrs) > MaxSearchAttributes {
		return nil, fmt.Errorf("%w: %d attributes, at most %d", ErrInvalidSearch, len(attrs), MaxSearchAttributes)
	}
	out := make([]SearchValue, 0, len(attrs))
	for _, name := range slices.Sorted(maps.Keys(attrs)) {
		if err := ValidateSearchName(name); err != nil {
			return nil, err
		}
		text, kind, err := SearchText(name, attrs[name])
		if err != nil {
			return nil, err
		}
		out = append(out, SearchValue{Name: name, Text: text, Kind: kind})
	}
	return out, nil
}
