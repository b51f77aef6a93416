// Decoding an instance's values once per step of the machine.

package sw

import (
	"bytes"
	"encoding/json"
	"hash/maphash"
)

// The machine keeps an instance's values as JSON text — the workflow's
// input, each frame's input down the tree of frames, a composite's result,
// the context — and decodes them where it needs them, often the same text
// several times in one step (a task's input is its list's and its
// parent's). Decoded JSON takes up to about 50 times its text, so one step
// decodes each text once (decodedValues) and lends the value to every
// place that reads it. Lending is safe because nothing changes a decoded
// value in place: the machine builds new values and gojq copies what it
// updates.

// decodedValues are the values decoded in one step, by their text.
type decodedValues struct {
	seed   maphash.Seed
	byHash map[uint64][]decodedText
}

// decodedText is a text and its value.
type decodedText struct {
	text []byte
	v    any
}

// decode returns raw decoded (decodeJSON): the value decoded before from
// the same text, if any.
func (x *exec) decode(raw []byte) (any, error) {
	if len(raw) < 64 {
		return decodeJSON(raw) // as cheap as a look-up
	}
	d := &x.values
	if d.byHash == nil {
		d.seed, d.byHash = maphash.MakeSeed(), map[uint64][]decodedText{}
	}
	h := maphash.Bytes(d.seed, raw)
	for _, e := range d.byHash[h] {
		if bytes.Equal(e.text, raw) {
			return e.v, nil
		}
	}
	v, err := decodeJSON(raw)
	if err != nil {
		return nil, err
	}
	d.byHash[h] = append(d.byHash[h], decodedText{text: raw, v: v})
	return v, nil
}

// fromRaw is decode for text the machine wrote itself: what does not
// decode is null.
func (x *exec) fromRaw(b json.RawMessage) any {
	v, err := x.decode(b)
	if err != nil {
		return nil
	}
	return v
}
