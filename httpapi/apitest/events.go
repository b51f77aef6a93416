package apitest

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"
)

// testEvents checks POST /v1/events: 202 with the event's id and the
// instances whose waiting steps it completed (each completed with the
// event's data), 400 for every malformed body, naming the field, and the
// event completing a step at most once.
func testEvents(t *testing.T, newServer NewServer) {
	a := &api{t: t, url: newServer(t)}
	expect(t, a.do("PUT", "/v1/definitions/pay", `name: pay
steps:
  - {id: paid, type: wait, event: payment, key: "{{ .input.order }}"}
  - {id: after, type: wait, depends_on: [paid]}
`), 201, "definition")
	for _, id := range []string{"ev-a", "ev-b", "ev-c"} {
		order := "o-1"
		if id == "ev-c" {
			order = "o-2"
		}
		expect(t, a.do("POST", "/v1/workflows", `{"id":"`+id+`","definition":"pay","input":{"order":"`+order+`"}}`), 201, "start "+id)
	}
	before := time.Now()
	r := a.do("POST", "/v1/events", `{"name":"payment","key":"o-1","data":{"amount":5}}`)
	expect(t, r, 202, "publish")
	var pub struct {
		ID        string    `json:"id"`
		Delivered []string  `json:"delivered"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	r.json(t, &pub)
	slices.Sort(pub.Delivered)
	if pub.ID == "" || !slices.Equal(pub.Delivered, []string{"ev-a", "ev-b"}) {
		t.Errorf("publish answered %s, want an id and delivered [ev-a ev-b]", r.body)
	}
	// Kept for the default --event-retention, 24h, for later waiters.
	if day := 24 * time.Hour; pub.ExpiresAt.Before(before.Add(day).Add(-time.Second)) || pub.ExpiresAt.After(time.Now().Add(day).Add(time.Second)) {
		t.Errorf("publish answered %s, want expires_at 24h from now", r.body)
	}
	for _, id := range []string{"ev-a", "ev-b"} {
		g := a.do("GET", "/v1/workflows/"+id, "")
		var inst struct {
			State struct {
				Steps map[string]struct {
					Status string
					Output map[string]int
					Event  struct{ Name, Key, ID string }
				}
			}
		}
		g.json(t, &inst)
		paid := inst.State.Steps["paid"]
		if paid.Status != "COMPLETED" || paid.Output["amount"] != 5 || paid.Event.Name != "payment" || paid.Event.Key != "o-1" || paid.Event.ID != pub.ID {
			t.Errorf("%s after the event: %s", id, g.body)
		}
	}
	if got := stepStatuses(t, a.do("GET", "/v1/workflows/ev-c", "")); got["paid"] != "WAITING" {
		t.Errorf("another key's waiter: %v", got)
	}
	// A waiting step's task is the engine's: no worker may poll its queue.
	expect(t, a.do("POST", "/v1/tasks/poll", `{"worker":"w1","handlers":["flowd:event/payment/o-2"],"wait_seconds":0}`), 400, "polling an event queue")
	// Once only: the same event again reaches nobody.
	r = a.do("POST", "/v1/events", `{"name":"payment","key":"o-1"}`)
	expect(t, r, 202, "publish again")
	if !bytes.Contains(r.body, []byte(`"delivered":[]`)) {
		t.Errorf("second publish: %s, want delivered []", r.body)
	}
	// No key is the key "", any JSON is data, none is null.
	for _, body := range []string{
		`{"name":"tick"}`,
		`{"name":"tick","data":null}`,
		`{"name":"tick","data":[1,"two",{"3":false}]}`,
		`{"name":"tick","data":"text"}`,
		`{"name":"a.B:c-d_9","key":"` + strings.Repeat("k", 256) + `","data":0.5}`,
		`{"name":"` + strings.Repeat("n", 128) + `","key":"` + strings.Repeat("é", 256) + `"}`,
	} {
		expect(t, a.do("POST", "/v1/events", body), 202, "publish "+body[:min(len(body), 40)])
	}
	for _, c := range []struct{ body, want string }{
		{`{}`, "name is required"},
		{`{"key":"k"}`, "name is required"},
		{`{"name":""}`, "name is required"},
		{`{"name":"pay/ment"}`, `name \"pay/ment\" has a character outside [A-Za-z0-9._:-]`},
		{`{"name":"pay ment"}`, "outside [A-Za-z0-9._:-]"},
		{`{"name":"` + strings.Repeat("n", 129) + `"}`, "name is longer than 128 characters"},
		{`{"name":"tick","key":"` + strings.Repeat("k", 257) + `"}`, "key has 257 characters, more than 256"},
		{`{"name":"tick","data":1,"extra":true}`, `unknown field \"extra\"`},
		{`{"name":7}`, `field \"name\" must be string`},
		{`{"name":"tick","key":5}`, `field \"key\" must be string`},
		{`{"name":"tick","data":}`, "invalid JSON body"},
		{`[]`, "invalid JSON body"},
		{``, "request body is empty"},
	} {
		r := a.do("POST", "/v1/events", c.body)
		expect(t, r, 400, "publish "+c.body[:min(len(c.body), 40)])
		if !bytes.Contains(r.body, []byte(c.want)) {
			t.Errorf("publish %.40s: %s, want a message with %q", c.body, r.body, c.want)
		}
	}
	expect(t, a.do("POST", "/v1/events", `{"name":"tick"}`, "Content-Type", "text/plain"), 415, "publish as text")
}
