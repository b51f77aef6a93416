package jsondelta

import "testing"

// A patch built from known changes applies as Diff's would: the member's
// sub-patch goes under "m" beside what the patch already changed there.
func TestBuiltPatches(t *testing.T) {
	for _, c := range []struct {
		name, doc, patch, want string
	}{
		{"nothing", `{"a":1,"o":{"x":1}}`, `{}`, `{"a":1,"o":{"x":1}}`},
		{"member only", `{"a":1,"o":{"x":1,"z":3}}`, `{}`, `{"a":1,"o":{"b":[2],"x":9}}`},
		{"beside d, m and s", `{"a":1,"d":0,"n":{"p":1},"o":{"x":1,"z":3}}`, `{"d":["d"],"m":{"n":{"s":{"q":2}}},"s":{"a":2}}`,
			`{"a":2,"n":{"p":1,"q":2},"o":{"b":[2],"x":9}}`},
	} {
		sub := ObjectPatch(nil, nil, nil)
		if sub != nil {
			t.Fatalf("ObjectPatch of no change = %s, want nil", sub)
		}
		if c.name != "nothing" {
			sub = ObjectPatch([]string{"z"}, []string{"b", "x"}, [][]byte{[]byte(`[2]`), []byte(`9`)})
		}
		patch, err := WithMember([]byte(c.patch), "o", sub)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got, err := Apply([]byte(c.doc), patch, Bytewise)
		if err != nil || string(got) != c.want {
			t.Errorf("%s: applying %s gives %s, %v; want %s", c.name, patch, got, err, c.want)
		}
	}
	if _, err := WithMember([]byte(`{"x":1}`), "o", []byte(`{}`)); err == nil {
		t.Error("WithMember of a patch with an unknown member: want an error")
	}
}
