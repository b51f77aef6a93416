package jsondelta

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// errSyntax is returned for a document or patch that is not what it must be.
var errSyntax = errors.New("jsondelta: malformed JSON")

// member is one key of an object: its text as written (rawKey, quotes
// included), its unescaped value, and its value.
type member struct {
	key    string
	rawKey []byte
	val    value
}

// value is a JSON value: raw text, or (once a patch descends into it) a
// parsed object that is changed in place.
type value struct {
	raw []byte
	obj *object
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// skipString returns the index after the string that starts at b[i]: at
// the first quote not escaped, that is one after an even run of
// backslashes. It looks for quotes with bytes.IndexByte, which is many
// times faster than a loop over the bytes on the long strings of step
// outputs.
func skipString(b []byte, i int) (int, error) {
	for {
		j := bytes.IndexByte(b[i+1:], '"')
		if j < 0 {
			return 0, errSyntax
		}
		end := i + 1 + j
		k := end
		for k > i+1 && b[k-1] == '\\' {
			k--
		}
		if (end-k)%2 == 0 {
			return end + 1, nil
		}
		i = end
	}
}

// skipValue returns the index after the value that starts at b[i] (no
// leading space). Callers validate documents as a whole first, so it only
// finds where a value ends.
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errSyntax
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				end, err := skipString(b, i)
				if err != nil {
					return 0, err
				}
				i = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, nil
				}
			}
		}
		return 0, errSyntax
	default:
		for ; i < len(b); i++ {
			switch c := b[i]; {
			case c == ',' || c == '}' || c == ']' || isSpace(c):
				return i, nil
			}
		}
		return i, nil
	}
}

// trim drops the space around a value.
func trim(b []byte) []byte {
	i, j := 0, len(b)
	for i < j && isSpace(b[i]) {
		i++
	}
	for j > i && isSpace(b[j-1]) {
		j--
	}
	return b[i:j]
}

func isObject(b []byte) bool { b = trim(b); return len(b) > 0 && b[0] == '{' }

// parseMembers splits the object text b into its members, values as raw
// text (not parsed further).
func parseMembers(b []byte) ([]member, error) {
	b = trim(b)
	if len(b) < 2 || b[0] != '{' {
		return nil, fmt.Errorf("%w: not an object", errSyntax)
	}
	var ms []member
	i := skipSpace(b, 1)
	if b[i] == '}' {
		return ms, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return nil, errSyntax
		}
		end, err := skipString(b, i)
		if err != nil {
			return nil, err
		}
		rawKey := b[i:end]
		key, err := unquote(rawKey)
		if err != nil {
			return nil, err
		}
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return nil, errSyntax
		}
		i = skipSpace(b, i+1)
		vend, err := skipValue(b, i)
		if err != nil {
			return nil, err
		}
		ms = append(ms, member{key: key, rawKey: rawKey, val: value{raw: b[i:vend]}})
		i = skipSpace(b, vend)
		if i >= len(b) {
			return nil, errSyntax
		}
		if b[i] == '}' {
			return ms, nil
		}
		if b[i] != ',' {
			return nil, errSyntax
		}
		i = skipSpace(b, i+1)
	}
}

// unquote returns the string a JSON string token stands for.
func unquote(tok []byte) (string, error) {
	plain := true
	for _, c := range tok[1 : len(tok)-1] {
		if c == '\\' {
			plain = false
			break
		}
	}
	if plain {
		return string(tok[1 : len(tok)-1]), nil
	}
	var s string
	if err := json.Unmarshal(tok, &s); err != nil {
		return "", fmt.Errorf("%w: key: %w", errSyntax, err)
	}
	return s, nil
}

// appendQuoted appends s as a JSON string.
func appendQuoted(dst []byte, s string) []byte {
	b, _ := json.Marshal(s) // a string always marshals
	return append(dst, b...)
}
