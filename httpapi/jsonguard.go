package httpapi

import (
	"fmt"
	"unicode/utf8"
)

// MaxJSONDepth is how deeply a request body may nest objects and arrays: the
// body's own object is level 1, so a PATCH may nest the state 64 levels deep
// and a create body its "state" and "input" 63.
const MaxJSONDepth = 64

// checkJSON is the one check every JSON body from a client passes before it
// is decoded, so that the same document is refused the same way whatever
// store sits behind the API: nesting deeper than MaxJSONDepth (decoders,
// merge patches and encoders would otherwise spend time and stack on every
// level), invalid UTF-8 (PostgreSQL's jsonb refuses it where SQLite keeps
// it), the escape \u0000 in any string, keys included (jsonb cannot store
// a NUL character), and numbers whose magnitude a float64 cannot hold
// (1e999999: code that reads numbers exactly, as a schema validator does,
// would spend seconds on each).
//
// It is one pass over the bytes with a depth counter and a fixed stack of
// the keys and indices above the current place, for the error to name it:
// no recursion and no memory that grows with the input. It only follows
// strings, brackets and numbers; whether the document is otherwise valid
// JSON is left to the decoder that reads it next, which reports syntax
// errors in its own words. The error says what is wrong and at which byte.
func checkJSON(b []byte) error {
	var path [MaxJSONDepth]jsonLevel
	depth := 0
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case c == '{' || c == '[':
			if depth++; depth > MaxJSONDepth {
				return fmt.Errorf("JSON nested deeper than %d levels at byte %d", MaxJSONDepth, i)
			}
			path[depth-1] = jsonLevel{array: c == '[', wantKey: c == '{'}
			i++
		case c == '}' || c == ']':
			if depth > 0 {
				depth--
			}
			i++
		case c == ',' && depth > 0:
			if l := &path[depth-1]; l.array {
				l.index++
			} else {
				l.wantKey = true
			}
			i++
		case c == ':' && depth > 0:
			path[depth-1].wantKey = false
			i++
		case c == '"':
			end, err := checkString(b, i)
			if err != nil {
				return err
			}
			if depth > 0 && path[depth-1].wantKey {
				path[depth-1].key = [2]int{i + 1, max(end-1, i+1)}
			}
			i = end
		case c == '-' || '0' <= c && c <= '9':
			end := numberEnd(b, i)
			if !float64Holds(b[i:end]) {
				return fmt.Errorf("the number %s at %s is out of range (a float64 cannot hold its magnitude) at byte %d", clipText(b[i:end]), pointerOf(b, path[:depth]), i)
			}
			i = end
		case c >= utf8.RuneSelf:
			// Outside a string this is a syntax error the decoder reports;
			// invalid UTF-8 is reported as such wherever it is.
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				return fmt.Errorf("invalid UTF-8 at byte %d", i)
			}
			i += size
		default:
			i++
		}
	}
	return nil
}

// jsonLevel is one object or array checkJSON is in: the index reached in
// an array, the last key read in an object (its bytes, quotes excluded).
type jsonLevel struct {
	array, wantKey bool
	index          int
	key            [2]int
}

// checkString checks the string whose opening quote is at b[start] and
// returns the index after its closing quote (or len(b) for a string that
// does not end: the decoder reports that).
func checkString(b []byte, start int) (int, error) {
	for i := start + 1; i < len(b); {
		c := b[i]
		switch {
		case c == '"':
			return i + 1, nil
		case c == '\\':
			if i+5 < len(b) && b[i+1] == 'u' && string(b[i+2:i+6]) == "0000" {
				return 0, fmt.Errorf(`a string holds the escape \u0000 (NUL), which cannot be stored, at byte %d`, i)
			}
			i += 2 // the escaped character cannot end the string
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				return 0, fmt.Errorf("invalid UTF-8 in a string at byte %d", i)
			}
			i += size
		default:
			i++
		}
	}
	return len(b), nil
}
