package httpapi

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// The examples of RFC 7396, appendix A, and a few of our own.
func TestMergePatchRFC7396(t *testing.T) {
	cases := []struct{ target, patch, want string }{
		{`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
		{`{"a":"b"}`, `{"a":null}`, `{}`},
		{`{"a":"b","b":"c"}`, `{"a":null}`, `{"b":"c"}`},
		{`{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"c"}`, `{"a":["b"]}`, `{"a":["b"]}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
		{`{"a":[{"b":"c"}]}`, `{"a":[1]}`, `{"a":[1]}`},
		{`["a","b"]`, `["c","d"]`, `["c","d"]`},
		{`{"a":"b"}`, `["c"]`, `["c"]`},
		{`{"a":"foo"}`, `null`, `null`},
		{`{"a":"foo"}`, `"bar"`, `"bar"`},
		{`{"e":null}`, `{"a":1}`, `{"e":null,"a":1}`},
		{`[1,2]`, `{"a":"b","c":null}`, `{"a":"b"}`},
		{`{}`, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`},
		// Ours: an absent target, nulls inside arrays kept, numbers kept
		// exactly, a later duplicate key winning as in encoding/json.
		{``, `{"a":{"b":null,"c":1}}`, `{"a":{"c":1}}`},
		{`{"a":1}`, `{"a":[null,{"b":null}]}`, `{"a":[null,{"b":null}]}`},
		{`{"n":1}`, `{"big":9007199254740993,"f":1.10}`, `{"n":1,"big":9007199254740993,"f":1.10}`},
		{`{"a":1}`, `{"a":2,"a":null}`, `{}`},
	}
	for _, c := range cases {
		got, err := mergePatch(json.RawMessage(c.target), json.RawMessage(c.patch))
		if err != nil {
			t.Errorf("mergePatch(%s, %s): %v", c.target, c.patch, err)
			continue
		}
		var g, w any
		dg, dw := json.NewDecoder(bytes.NewReader(got)), json.NewDecoder(strings.NewReader(c.want))
		dg.UseNumber()
		dw.UseNumber()
		if dg.Decode(&g) != nil || dw.Decode(&w) != nil || !reflect.DeepEqual(g, w) {
			t.Errorf("mergePatch(%s, %s) = %s, want %s", c.target, c.patch, got, c.want)
		}
	}
	if _, err := mergePatch(json.RawMessage(`{"a":{`), json.RawMessage(`{"a":{"b":1}}`)); err == nil {
		t.Error("a malformed target should be an error")
	}
}
