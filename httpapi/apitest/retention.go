package apitest

import (
	"bytes"
	"testing"

	"github.com/flowd/flowd/httpapi"
)

// testDefinitionRetention checks a definition's retention through PUT
// /v1/definitions/{name}: an invalid one is a 400 naming the field and
// stores nothing; a valid one, 0 included, is stored and read back.
func testDefinitionRetention(t *testing.T, newServer NewServer) {
	a := &api{t: t, url: newServer(t)}
	const steps = `"steps": [{"id": "a", "type": "wait"}]`
	for value, problem := range map[string]string{
		`"30d"`: `retention: invalid duration "30d" (want a Go duration such as "30s", "10m" or "1h30m"; its largest unit is h: 720h is 30 days)`,
		`"-1h"`: `retention: duration "-1h" must not be negative`,
		`7`:     `retention: want a duration string with a unit such as "30s", "10m" or "1h30m", not 7`,
	} {
		r := a.do("PUT", "/v1/definitions/kept", `{"name": "kept", "retention": `+value+`, `+steps+`}`)
		expect(t, r, 400, "retention "+value)
		var e httpapi.ErrorBody
		r.json(t, &e)
		if len(e.Problems) != 1 || e.Problems[0] != problem {
			t.Errorf("retention %s: problems %q, want [%q]", value, e.Problems, problem)
		}
		expect(t, a.do("GET", "/v1/definitions/kept", ""), 404, "a definition refused for its retention "+value)
	}
	r := a.do("PUT", "/v1/definitions/kept", "name: kept\nretention: 720h\nsteps: [{id: a, type: wait}]\n")
	expect(t, r, 201, "retention 720h")
	if r = a.do("GET", "/v1/definitions/kept", ""); !bytes.Contains(r.body, []byte(`"retention":"720h"`)) {
		t.Errorf("GET after retention 720h: %s", r.body)
	}
	expect(t, a.do("PUT", "/v1/definitions/kept", "name: kept\nretention: 0\nsteps: [{id: a, type: wait}]\n"), 201, "retention 0, a new revision")
	if r = a.do("GET", "/v1/definitions/kept", ""); !bytes.Contains(r.body, []byte(`"retention":"0s"`)) {
		t.Errorf("GET after retention 0: %s, want it kept as 0s (for ever), not dropped", r.body)
	}
	expect(t, a.do("PUT", "/v1/definitions/kept", "name: kept\nsteps: [{id: a, type: wait}]\n"), 201, "no retention, a new revision")
}
