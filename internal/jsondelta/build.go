package jsondelta

// Patches made without Diff, by a caller that knows what changed: a store
// that keeps parts of a document apart knows which parts a write replaced,
// and builds their patch without reading the parts that stayed.

// ObjectPatch returns the patch of an object that deletes the keys del
// and sets the keys set, whose JSON values are vals (replaced whole; a
// key the object lacks is inserted as Apply inserts it). Nil when it
// changes nothing.
func ObjectPatch(del, set []string, vals [][]byte) []byte {
	if len(del) == 0 && len(set) == 0 {
		return nil
	}
	dst := []byte{'{'}
	if len(del) > 0 {
		dst = append(dst, `"d":[`...)
		for i, k := range del {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendQuoted(dst, k)
		}
		dst = append(dst, ']')
	}
	if len(set) > 0 {
		if len(del) > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `"s":{`...)
		for i, k := range set {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendQuoted(dst, k)
			dst = append(dst, ':')
			dst = append(dst, vals[i]...)
		}
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

// WithMember returns patch, a patch of an object that leaves its member
// key alone (Diff's of two objects with the same value there), changed to
// apply sub to that member too. A nil sub changes nothing.
func WithMember(patch []byte, key string, sub []byte) ([]byte, error) {
	if sub == nil {
		return patch, nil
	}
	del, set, nested, err := patchMembers(patch)
	if err != nil {
		return nil, err
	}
	member := appendQuoted(nil, key)
	member = append(append(member, ':'), sub...)
	if nested == nil {
		nested = append(append([]byte{'{'}, member...), '}')
	} else {
		nested = trim(nested)
		if len(nested) > 2 {
			member = append([]byte{','}, member...)
		}
		nested = append(append(append([]byte(nil), nested[:len(nested)-1]...), member...), '}')
	}
	dst := []byte{'{'}
	if del != nil {
		dst = append(append(dst, `"d":`...), del...)
		dst = append(dst, ',')
	}
	dst = append(append(dst, `"m":`...), nested...)
	if set != nil {
		dst = append(append(append(dst, ','), `"s":`...), set...)
	}
	return append(dst, '}'), nil
}
