package apitest

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// testIdempotencyKey: POST /v1/workflows with an Idempotency-Key creates
// once; a repeat (the same body, whatever its key order and spacing) gets
// that instance as it is now with 200, ETag and Location; another body gets
// 422; a malformed key 400.
func testIdempotencyKey(t *testing.T, newServer NewServer) {
	a := &api{t: t, url: newServer(t)}
	const body = `{"input":{"sku":"A-1","qty":2},"state":{"variables":{"n":1,"m":2}}}`
	first := a.do("POST", "/v1/workflows", body, "Idempotency-Key", "order-A-1")
	expect(t, first, 201, "first create with a key")
	id, _ := first.instance(t)["id"].(string)

	// The instance moves on; a repeat sees it as it is now.
	expect(t, a.do("PATCH", "/v1/workflows/"+id, `{"variables":{"n":5}}`, "If-Match", `"0"`), 200, "patch")
	for _, repeat := range []string{body, `{ "state": {"variables": {"m": 2, "n": 1}}, "input": {"qty": 2, "sku": "A-1"} }`} {
		r := a.do("POST", "/v1/workflows", repeat, "Idempotency-Key", "order-A-1")
		expect(t, r, 200, "repeat "+repeat)
		inst := r.instance(t)
		if inst["id"] != id || inst["version"] != 1.0 || r.header.Get("ETag") != `"1"` || r.header.Get("Location") != "/v1/workflows/"+id {
			t.Errorf("repeat: id %v version %v ETag %s Location %s; want %s at version 1", inst["id"], inst["version"], r.header.Get("ETag"), r.header.Get("Location"), id)
		}
		if vars := inst["state"].(map[string]any)["variables"].(map[string]any); vars["n"] != 5.0 {
			t.Errorf("repeat: variables %v, want the patched n = 5", vars)
		}
	}
	for _, other := range []string{`{"input":{"sku":"A-1","qty":3},"state":{"variables":{"n":1,"m":2}}}`, `{}`, `{"id":"other"}`} {
		r := a.do("POST", "/v1/workflows", other, "Idempotency-Key", "order-A-1")
		expect(t, r, 422, "the key with another body "+other)
		if !strings.Contains(string(r.body), "different request") || !strings.Contains(string(r.body), id) {
			t.Errorf("422 body %s should say the key was used for a different request, naming %s", r.body, id)
		}
	}
	expect(t, a.do("GET", "/v1/workflows/other", ""), 404, "the refused create's id")

	// Absent and null input and state are {} for the comparison.
	expect(t, a.do("POST", "/v1/workflows", `{}`, "Idempotency-Key", "empty"), 201, "empty body with a key")
	expect(t, a.do("POST", "/v1/workflows", `{"input":null,"state":{}}`, "Idempotency-Key", "empty"), 200, "the same, written out")
	expect(t, a.do("POST", "/v1/workflows", ``, "Idempotency-Key", "empty"), 200, "no body at all")

	// A client id with a key: a repeat is 200, not 409.
	expect(t, a.do("POST", "/v1/workflows", `{"id":"keyed-id"}`, "Idempotency-Key", "k-id"), 201, "client id with a key")
	expect(t, a.do("POST", "/v1/workflows", `{"id":"keyed-id"}`, "Idempotency-Key", "k-id"), 200, "its repeat")
	expect(t, a.do("POST", "/v1/workflows", `{"id":"keyed-id"}`), 409, "the id without the key")
	expect(t, a.do("POST", "/v1/workflows", `{"id":"keyed-id"}`, "Idempotency-Key", "k-id-2"), 409, "the id with another key")
	expect(t, a.do("POST", "/v1/workflows", `{"id":"keyed-id-2"}`, "Idempotency-Key", "k-id-2"), 201, "a key not recorded by a refused create")

	for _, key := range []string{strings.Repeat("k", 256), "é", "tab\there"} {
		expect(t, a.do("POST", "/v1/workflows", `{}`, "Idempotency-Key", key), 400, fmt.Sprintf("key %q", key))
	}
	expect(t, a.do("POST", "/v1/workflows", `{}`, "Idempotency-Key", strings.Repeat("~", 255)), 201, "a key of 255 characters")
	req, _ := http.NewRequest("POST", a.url+"/v1/workflows", strings.NewReader(`{}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header["Idempotency-Key"] = []string{""}
	expect(t, a.send(req), 400, "an empty key")
	req, _ = http.NewRequest("POST", a.url+"/v1/workflows", strings.NewReader(`{}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header["Idempotency-Key"] = []string{"a", "b"}
	expect(t, a.send(req), 400, "two keys")
	// A bad body is a 400 whatever the key.
	expect(t, a.do("POST", "/v1/workflows", `{"idd":1}`, "Idempotency-Key", "bad-body"), 400, "unknown field with a key")
	expect(t, a.do("POST", "/v1/workflows", `{}`, "Idempotency-Key", "bad-body"), 201, "the key of a refused body is free")

	// Concurrent creates with one key, free-form and of a definition:
	// exactly one 201, the others 200 with the same id.
	expect(t, a.do("PUT", "/v1/definitions/idem", `{"name":"idem","steps":[{"id":"a","type":"wait"}]}`), 201, "definition")
	for _, b := range []string{`{"input":{"x":1}}`, `{"definition":"idem","input":{"x":1}}`} {
		const n = 8
		var wg sync.WaitGroup
		res := make([]resp, n)
		start := make(chan struct{})
		key := "concurrent-" + fmt.Sprint(len(b))
		for i := range n {
			wg.Go(func() {
				<-start
				res[i] = a.doQuiet("POST", "/v1/workflows", b, "Idempotency-Key", key)
			})
		}
		close(start)
		wg.Wait()
		created, ids := 0, map[any]bool{}
		for i, r := range res {
			if r.status != 201 && r.status != 200 {
				t.Fatalf("%s: concurrent create %d: status %d %s", b, i, r.status, r.body)
			}
			if r.status == 201 {
				created++
			}
			ids[r.instance(t)["id"]] = true
		}
		if created != 1 || len(ids) != 1 {
			t.Errorf("%s: %d concurrent creates with one key: %d created, ids %v; want 1 created and one id", b, n, created, ids)
		}
	}
}

// doQuiet is do for other goroutines than the test's: a transport error is
// reported with Error and a zero resp, never Fatal.
func (a *api) doQuiet(method, path, body string, headers ...string) resp {
	req, err := http.NewRequest(method, a.url+path, strings.NewReader(body))
	if err != nil {
		a.t.Error(err)
		return resp{}
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return a.send(req)
}
