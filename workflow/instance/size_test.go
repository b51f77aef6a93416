package instance

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestCheckSize(t *testing.T) {
	st, err := ParseState([]byte(`{"variables":{"a":"<&>\u2028"},"steps":{"s":{"status":"FAILED","error":"x","output":[1,2],"k":"v"},"t":{}},"note":{"b":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	st.Steps["s"].Error = "\x01\xff<" // escaped when encoded: the bound must still hold
	b, err := st.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if st.sizeBound() < len(b) {
		t.Errorf("sizeBound %d is below the encoded size %d", st.sizeBound(), len(b))
	}
	for _, max := range []int{0, -1, len(b), len(b) + 1, 1 << 20} {
		if err := st.CheckSize(max); err != nil {
			t.Errorf("CheckSize(%d) of a %d-byte state: %v", max, len(b), err)
		}
	}
	err = st.CheckSize(len(b) - 1)
	var tl *StateTooLargeError
	if !errors.Is(err, ErrStateTooLarge) || !errors.As(err, &tl) || tl.Size != len(b) || tl.Max != len(b)-1 {
		t.Errorf("CheckSize(%d) of a %d-byte state: %v", len(b)-1, len(b), err)
	}
}

// sizeBound is an upper bound of the encoded size whatever the strings hold.
func FuzzStateSizeBound(f *testing.F) {
	f.Add("k", "<>&", "\x00\xff", `{"a":"\u2028"}`)
	f.Fuzz(func(t *testing.T, key, str, errMsg, raw string) {
		if !json.Valid([]byte(raw)) {
			raw = `null`
		}
		st := State{
			Variables: map[string]json.RawMessage{key: json.RawMessage(raw)},
			Extra:     map[string]json.RawMessage{strings.ToUpper(key) + "x": json.RawMessage(`"` + strings.ReplaceAll(str, `"`, ``) + `"`)},
			Steps:     map[string]*StepState{key: {Status: StepStatus(str), Error: errMsg, Output: json.RawMessage(raw), Extra: map[string]json.RawMessage{str: json.RawMessage(raw)}}},
		}
		b, err := st.MarshalJSON()
		if err != nil {
			return
		}
		if st.sizeBound() < len(b) {
			t.Fatalf("sizeBound %d below the encoded size %d of %s", st.sizeBound(), len(b), b)
		}
		// Once Encode has marked the output, it counts as its length.
		if _, err := st.Encode(); err != nil {
			t.Fatal(err)
		}
		if st.sizeBound() < len(b) {
			t.Fatalf("sizeBound %d after Encode below the encoded size %d of %s", st.sizeBound(), len(b), b)
		}
	})
}
