// The memory a JSON document takes once decoded into the Go values an
// expression reads, estimated from its text without decoding it.

package workflow

import "bytes"

// Decoded JSON costs far more than its text: each value is boxed in an
// interface, each object is a Go map of at least one group of eight slots,
// each array a slice of interfaces. Measured with Go 1.26 on amd64 (live
// heap after decoding 1 MiB with json.Decoder and UseNumber, per element
// with its 16-byte array slot): {"a":1} 370 bytes (46× its text), {"":1}
// 370 (53×, the costliest shape per byte), {} 64
// (21×), [] 40 (13×), 1 33 (17×), "ab" 36 (7×), true 18 (3.5×); a long
// string about its length. The costs below are those measurements; the
// estimate stays within a factor of two of the live heap for every shape
// TestDecodedSizeFollowsTheHeap measures.
const (
	// decodedSlot is an element's place in an array: an interface,
	// 16 bytes, plus a quarter for the spare capacity append leaves.
	decodedSlot = 20
	// decodedArray is an array's slice header, boxed.
	decodedArray = 24
	// decodedBox is a string or a number (json.Number) boxed in an
	// interface: its header; the text is counted besides.
	decodedBox = 16
	// decodedMap is a map's header; decodedSmallMap its first group of
	// eight key/value slots, enough for up to eight keys; a larger map
	// costs decodedMapSlot per key (slots of 32 bytes, tables at most
	// 7/8 full and grown by doubling, and their directory).
	decodedMap      = 48
	decodedSmallMap = 288
	decodedMapSlot  = 64
)

// DecodedSize estimates the bytes the Go values decoded from raw (a JSON
// value, as exprValue decodes it) hold, in one linear scan of its text:
// objects and their keys, arrays and their elements, strings and numbers
// by their length. It reads anything without failing: text that is not
// JSON gets some estimate, and the decoder refuses it after.
func DecodedSize(raw []byte) int64 {
	var stack []openValue
	var n int64
	// element counts one more value in the innermost open container.
	element := func() {
		if len(stack) > 0 && !stack[len(stack)-1].object {
			stack[len(stack)-1].members++
			n += decodedSlot
		}
	}
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; c {
		case ' ', '\t', '\n', '\r', ':':
		case ',':
			if len(stack) > 0 && stack[len(stack)-1].object {
				stack[len(stack)-1].wantKey = true
			}
		case '{', '[':
			element()
			stack = append(stack, openValue{object: c == '{', wantKey: c == '{'})
		case '}', ']':
			if len(stack) == 0 {
				continue
			}
			top := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			switch {
			case !top.object:
				n += decodedArray
			case top.members == 0:
				n += decodedMap
			case top.members <= 8:
				n += decodedMap + decodedSmallMap
			default:
				n += decodedMap + decodedMapSlot*top.members
			}
		case '"':
			end := stringEnd(raw, i+1)
			length := int64(end - i - 1)
			if len(stack) > 0 && stack[len(stack)-1].wantKey {
				top := &stack[len(stack)-1]
				top.wantKey = false
				top.members++
				n += length
			} else {
				element()
				n += decodedBox + length
			}
			i = end
		default:
			// A literal: true, false and null take no memory of their
			// own; a number keeps its text.
			end := i
			for end < len(raw) && !literalEnd(raw[end]) {
				end++
			}
			element()
			if c != 't' && c != 'f' && c != 'n' {
				n += decodedBox + int64(end-i)
			}
			i = end - 1
		}
	}
	return n
}

// openValue is an object or an array whose end the scan has not met.
type openValue struct {
	object  bool
	members int64
	wantKey bool // an object before its next key
}

// stringEnd returns the index of the quote that closes the string whose
// text starts at from (len(raw) when none does).
func stringEnd(raw []byte, from int) int {
	if q := bytes.IndexByte(raw[from:], '"'); q >= 0 && bytes.IndexByte(raw[from:from+q], '\\') < 0 {
		return from + q // no escape before the quote: the common case
	}
	for i := from; i < len(raw); i++ {
		switch raw[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return len(raw)
}

// literalEnd reports whether c ends a literal (a number, true, false, null).
func literalEnd(c byte) bool {
	switch c {
	case ',', ']', '}', ':', ' ', '\t', '\n', '\r', '"', '{', '[':
		return true
	}
	return false
}
