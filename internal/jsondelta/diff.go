package jsondelta

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Diff returns the patch that turns the JSON object old into the JSON object
// new under Apply with order o. ok is false when no patch can: new's keys
// are in an order that Apply's rule does not produce from old's (then the
// caller stores new whole). Values are compared by their text, so that the
// patch reproduces new byte for byte: equal values written differently (1
// and 1.0, "é" and "\u00e9") are a change.
func Diff(old, new []byte, o Order) (patch []byte, ok bool, err error) {
	if !json.Valid(old) || !json.Valid(new) {
		return nil, false, fmt.Errorf("%w: diff of invalid JSON", errSyntax)
	}
	if !isObject(old) || !isObject(new) {
		return nil, false, fmt.Errorf("%w: diff of a value that is not an object", errSyntax)
	}
	return diffObjects(nil, trim(old), trim(new), o)
}

// diffObjects appends the patch of old → new to dst.
func diffObjects(dst, old, new []byte, o Order) ([]byte, bool, error) {
	om, err := parseMembers(old)
	if err != nil {
		return nil, false, err
	}
	nm, err := parseMembers(new)
	if err != nil {
		return nil, false, err
	}
	oi, ok := indexOf(om)
	if !ok {
		return nil, false, nil // duplicate keys: only a whole value says which is which
	}
	ni, ok := indexOf(nm)
	if !ok {
		return nil, false, nil
	}

	var del, set, sub []byte
	var remaining []string // old's keys that stay, in old's order
	for _, m := range om {
		if _, kept := ni[m.key]; kept {
			remaining = append(remaining, m.key)
			continue
		}
		del = appendSep(del, '[')
		del = appendQuoted(del, m.key)
	}
	var added []string
	for _, m := range nm {
		i, had := oi[m.key]
		if !had {
			added = append(added, m.key)
			set = appendMember(set, m.rawKey, m.val.raw)
			continue
		}
		was := om[i]
		if bytes.Equal(was.val.raw, m.val.raw) && bytes.Equal(was.rawKey, m.rawKey) {
			continue
		}
		if bytes.Equal(was.rawKey, m.rawKey) && isObject(was.val.raw) && isObject(m.val.raw) {
			before := sub
			withKey := appendSep(sub, '{')
			withKey = append(append(withKey, m.rawKey...), ':')
			nested, ok, err := diffObjects(withKey, was.val.raw, m.val.raw, o)
			if err != nil {
				return nil, false, err
			}
			if ok {
				sub = nested
				continue
			}
			// Not expressible below: set the value whole.
			sub = before
		}
		set = appendMember(set, m.rawKey, m.val.raw)
	}
	if !reproducesOrder(remaining, added, nm, o) {
		return nil, false, nil
	}
	dst = append(dst, '{')
	n := len(dst)
	if del != nil {
		dst = append(append(append(dst, `"d":`...), del...), ']')
	}
	if sub != nil {
		if len(dst) > n {
			dst = append(dst, ',')
		}
		dst = append(append(append(dst, `"m":`...), sub...), '}')
	}
	if set != nil {
		if len(dst) > n {
			dst = append(dst, ',')
		}
		dst = append(append(append(dst, `"s":`...), set...), '}')
	}
	return append(dst, '}'), true, nil
}

// reproducesOrder reports whether Apply's rule, inserting added into
// remaining, gives new's key order.
func reproducesOrder(remaining, added []string, nm []member, o Order) bool {
	keys := remaining
	sorted := o.sorted(len(keys), func(i int) string { return keys[i] })
	for _, k := range added {
		at := o.insertAt(len(keys), func(i int) string { return keys[i] }, sorted, k)
		keys = append(keys, "")
		copy(keys[at+1:], keys[at:])
		keys[at] = k
	}
	for i, m := range nm {
		if keys[i] != m.key {
			return false
		}
	}
	return true
}

func indexOf(ms []member) (map[string]int, bool) {
	idx := make(map[string]int, len(ms))
	for i, m := range ms {
		if _, dup := idx[m.key]; dup {
			return nil, false
		}
		idx[m.key] = i
	}
	return idx, true
}

// appendSep starts a list with open or continues it with a comma.
func appendSep(dst []byte, open byte) []byte {
	if dst == nil {
		return []byte{open}
	}
	return append(dst, ',')
}

func appendMember(dst, rawKey, val []byte) []byte {
	dst = appendSep(dst, '{')
	dst = append(dst, rawKey...)
	dst = append(dst, ':')
	return append(dst, val...)
}
