package apitest

import (
	"bytes"
	"strings"
	"testing"
)

// testParentFilter: ?parent= keeps a parent's child workflows (a workflow
// started otherwise has none, and is no one's child); a malformed id is a
// 400 naming the parameter. (The server under test runs no workers, so no
// child starts here: the engine's tests start them, on both stores.)
func testParentFilter(t *testing.T, newServer NewServer) {
	a := &api{t: t, url: newServer(t)}
	a.create("loner", "")
	a.create("other", "")
	for _, q := range []string{"parent=loner", "parent=nobody", "parent=loner&status=PENDING"} {
		r := a.do("GET", "/v1/workflows?"+q, "")
		expect(t, r, 200, "list "+q)
		if bytes.Contains(r.body, []byte(`"id"`)) {
			t.Errorf("list %s: %s, want no workflow", q, r.body)
		}
	}
	for _, q := range []string{"parent=", "parent=a%20b", "parent=a%2Fb", "parent=" + strings.Repeat("a", 129)} {
		r := a.do("GET", "/v1/workflows?"+q, "")
		expect(t, r, 400, "list "+q)
		if !bytes.Contains(r.body, []byte("parent")) {
			t.Errorf("list %s: %s does not name the parameter", q, r.body)
		}
	}
}
