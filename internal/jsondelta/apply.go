package jsondelta

import (
	"encoding/json"
	"fmt"
	"slices"
)

// object is a parsed object that patches change in place.
type object struct {
	members []member
	index   map[string]int // key → position; nil when positions moved
	sorted  bool
}

func newObject(raw []byte, o Order) (*object, error) {
	ms, err := parseMembers(raw)
	if err != nil {
		return nil, err
	}
	obj := &object{members: ms}
	obj.sorted = o.sorted(len(ms), obj.key)
	return obj, nil
}

func (obj *object) key(i int) string { return obj.members[i].key }

func (obj *object) find(k string) (int, bool) {
	if obj.index == nil {
		obj.index = make(map[string]int, len(obj.members))
		for i, m := range obj.members {
			if _, dup := obj.index[m.key]; !dup {
				obj.index[m.key] = i
			}
		}
	}
	i, ok := obj.index[k]
	return i, ok
}

// Doc is a JSON object that patches are applied to in place: applying a
// patch costs about the size of the patch and of the objects it changes, not
// of the whole document, and the document is written out only when asked.
type Doc struct {
	root  *object
	order Order
}

// Parse reads the JSON object b for patches in order o. Doc keeps
// references into b: b must not change afterwards.
func Parse(b []byte, o Order) (*Doc, error) {
	if !json.Valid(b) {
		return nil, fmt.Errorf("%w: document is not valid JSON", errSyntax)
	}
	root, err := newObject(b, o)
	if err != nil {
		return nil, err
	}
	return &Doc{root: root, order: o}, nil
}

// Apply applies patch to d. On error d may be partly changed. d keeps
// references into patch: patch must not change afterwards.
func (d *Doc) Apply(patch []byte) error {
	if !json.Valid(patch) {
		return fmt.Errorf("%w: patch is not valid JSON", errSyntax)
	}
	return d.applyTo(d.root, patch)
}

// JSON returns the document's text.
func (d *Doc) JSON() []byte { return appendObject(nil, d.root) }

// applyTo applies one patch level to obj: deletions first, then sets (so
// that a new key's place depends on the keys that remain), then changes
// of nested objects.
func (d *Doc) applyTo(obj *object, patch []byte) error {
	del, set, sub, err := patchMembers(patch)
	if err != nil {
		return err
	}
	if del != nil {
		var keys []string
		if err := json.Unmarshal(del, &keys); err != nil {
			return fmt.Errorf("%w: patch \"d\" must be an array of strings: %w", errSyntax, err)
		}
		for _, k := range keys {
			i, ok := obj.find(k)
			if !ok {
				return fmt.Errorf("%w: patch deletes %q, which is not there", errSyntax, k)
			}
			obj.members = slices.Delete(obj.members, i, i+1)
			obj.index = nil
		}
		obj.sorted = d.order.sorted(len(obj.members), obj.key)
	}
	if set != nil {
		sets, err := parseMembers(set)
		if err != nil {
			return err
		}
		for _, s := range sets {
			if i, ok := obj.find(s.key); ok {
				obj.members[i].rawKey, obj.members[i].val = s.rawKey, s.val
				continue
			}
			at := d.order.insertAt(len(obj.members), obj.key, obj.sorted, s.key)
			obj.members = slices.Insert(obj.members, at, s)
			obj.index = nil
		}
	}
	if sub != nil {
		subs, err := parseMembers(sub)
		if err != nil {
			return err
		}
		for _, s := range subs {
			i, ok := obj.find(s.key)
			if !ok {
				return fmt.Errorf("%w: patch changes %q, which is not there", errSyntax, s.key)
			}
			v := &obj.members[i].val
			if v.obj == nil {
				if !isObject(v.raw) {
					return fmt.Errorf("%w: patch changes %q as an object, which it is not", errSyntax, s.key)
				}
				if v.obj, err = newObject(v.raw, d.order); err != nil {
					return err
				}
				v.raw = nil
			}
			if err := d.applyTo(v.obj, s.val.raw); err != nil {
				return err
			}
		}
	}
	return nil
}

// patchMembers returns the "d", "s" and "m" members of one level of a
// patch (nil when absent).
func patchMembers(patch []byte) (del, set, sub []byte, err error) {
	ops, err := parseMembers(patch)
	if err != nil {
		return nil, nil, nil, err
	}
	for _, op := range ops {
		switch op.key {
		case "d":
			del = op.val.raw
		case "s":
			set = op.val.raw
		case "m":
			sub = op.val.raw
		default:
			return nil, nil, nil, fmt.Errorf("%w: unknown patch member %q", errSyntax, op.key)
		}
	}
	return del, set, sub, nil
}

func appendObject(dst []byte, obj *object) []byte {
	dst = append(dst, '{')
	for i, m := range obj.members {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, m.rawKey...)
		dst = append(dst, ':')
		if m.val.obj != nil {
			dst = appendObject(dst, m.val.obj)
		} else {
			dst = append(dst, m.val.raw...)
		}
	}
	return append(dst, '}')
}

// Apply returns doc with patch applied (both JSON objects), in order o.
func Apply(doc, patch []byte, o Order) ([]byte, error) {
	d, err := Parse(doc, o)
	if err != nil {
		return nil, err
	}
	if err := d.Apply(patch); err != nil {
		return nil, err
	}
	return d.JSON(), nil
}
