package apitest

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/httpapi"
)

// testSchedules: the schedule routes, their status codes and every client
// mistake they answer.
func testSchedules(t *testing.T, newServer NewServer) {
	a := &api{t: t, url: newServer(t)}
	expect(t, a.do("PUT", "/v1/definitions/sched-job", `{"name": "sched-job", "steps": [{"id": "a", "type": "task", "handler": "nobody"}]}`), 201, "definition")

	// Created, then replaced.
	body := `{"definition": "sched-job", "cron": "30 2 * * *", "timezone": "Europe/Paris", "input": {"k": 1}}`
	r := a.do("PUT", "/v1/schedules/nightly", body)
	expect(t, r, 201, "create schedule")
	if loc := r.header.Get("Location"); loc != "/v1/schedules/nightly" {
		t.Errorf("Location = %q", loc)
	}
	var s httpapi.Schedule
	r.json(t, &s)
	if s.Name != "nightly" || s.Overlap != "skip" || s.CatchupWindow != "1m0s" || s.Timezone != "Europe/Paris" || s.Paused ||
		string(s.Input) != `{"k":1}` || len(s.NextFireTimes) != 5 {
		t.Errorf("created schedule: %s", r.body)
	}
	for i, ft := range s.NextFireTimes {
		if local := ft.In(mustZone(t, "Europe/Paris")); local.Minute() != 30 || (local.Hour() != 2 && local.Hour() != 3) || ft.Location() != time.UTC {
			t.Errorf("next fire time %d = %v (%v in Paris)", i, ft, local)
		}
		if i > 0 && !ft.After(s.NextFireTimes[i-1]) {
			t.Errorf("next fire times not increasing: %v", s.NextFireTimes)
		}
	}
	if !bytes.Contains(r.body, []byte(`"next_fire_times":["`)) || !bytes.Contains(r.body, []byte(`Z"`)) {
		t.Errorf("next_fire_times are not RFC 3339 in UTC: %s", r.body)
	}
	r = a.do("PUT", "/v1/schedules/nightly", `{"definition": "sched-job", "cron": "@every 1h", "overlap": "buffer_one", "paused": true, "catchup_window": "90s"}`)
	expect(t, r, 200, "replace schedule")
	r.json(t, &s)
	if s.Cron != "@every 1h" || s.Overlap != "buffer_one" || !s.Paused || s.CatchupWindow != "1m30s" || s.Timezone != "UTC" {
		t.Errorf("replaced schedule: %s", r.body)
	}

	// Client mistakes.
	for _, tc := range []struct {
		path, body, want string
		status           int
	}{
		{"/v1/schedules/x", `{"definition": "missing", "cron": "* * * * *"}`, `definition \"missing\" not found`, 404},
		{"/v1/schedules/x", `{"definition": "sched-job", "cron": "* * *"}`, "has 3 fields; it needs 5", 400},
		{"/v1/schedules/x", `{"definition": "sched-job", "cron": "0 0 30 2 *"}`, "never fires", 400},
		{"/v1/schedules/x", `{"definition": "sched-job", "cron": "@every 100ms"}`, "at least 1s", 400},
		// Fire times so far apart that they would pass the last date flowd
		// computes (they wrapped around to 1727).
		{"/v1/schedules/x", `{"definition": "sched-job", "cron": "@every 1000000h"}`, "@every takes at most 87600h0m0s (10 years)", 400},
		{"/v1/schedules/x", `{"definition": "sched-job", "cron": "@every 2562047h"}`, "the last date flowd computes", 400},
		{"/v1/schedules/x", `{"definition": "sched-job", "cron": "* * * * *", "timezone": "Mars/Base"}`, "not an IANA time zone", 400},
		{"/v1/schedules/x", `{"definition": "sched-job", "cron": "* * * * *", "overlap": "queue"}`, `overlap \"queue\" is not one of`, 400},
		{"/v1/schedules/x", `{"definition": "sched-job", "cron": "* * * * *", "catchup_window": "soon"}`, "catchup_window", 400},
		{"/v1/schedules/x", `{"definition": "sched-job", "cron": "* * * * *", "catchup_window": "-1m"}`, "catchup_window", 400},
		{"/v1/schedules/x", `{"definition": "sched-job", "cron": "* * * * *", "input": {`, "invalid JSON", 400},
		{"/v1/schedules/x", `{"definition": "sched-job", "cron": "* * * * *", "extra": 1}`, "extra", 400},
		{"/v1/schedules/x", `{"cron": "* * * * *"}`, "needs a definition", 400},
		{"/v1/schedules/x", `{"definition": "sched-job"}`, "needs a cron", 400},
		{"/v1/schedules/a:b", `{"definition": "sched-job", "cron": "* * * * *"}`, "schedule name", 400},
		{"/v1/schedules/" + strings.Repeat("n", 112), `{"definition": "sched-job", "cron": "* * * * *"}`, "at most 111", 400},
	} {
		r := a.do("PUT", tc.path, tc.body)
		expect(t, r, tc.status, "PUT "+tc.body)
		if !bytes.Contains(r.body, []byte(tc.want)) {
			t.Errorf("PUT %s %s: %s, want a message with %q", tc.path, tc.body, r.body, tc.want)
		}
	}
	if r := a.do("GET", "/v1/schedules/x", ""); r.status != 404 {
		t.Errorf("a refused PUT stored its schedule: %d %s", r.status, r.body)
	}
	// Every problem at once, as for a definition: one each in "problems",
	// all of them in the message.
	for _, tc := range []struct {
		path, body string
		want       []string
	}{
		{"/v1/schedules/a:b", `{"cron": "61 * * * *", "timezone": "Mars/Base", "overlap": "queue", "catchup_window": "soon"}`, []string{
			`schedule name "a:b"`, "a schedule needs a definition", `overlap "queue" is not one of`,
			`cron "61 * * * *" is not a valid 5-field cron expression`, `timezone "Mars/Base" is not an IANA time zone`,
			`catchup_window "soon" is not a positive Go duration`,
		}},
		{"/v1/schedules/x", `{"definition": "sched-job", "timezone": "Local", "catchup_window": "-1m"}`, []string{
			"a schedule needs a cron expression", `timezone "Local" depends on the machine`, `catchup_window "-1m" is not a positive Go duration`,
		}},
	} {
		r := a.do("PUT", tc.path, tc.body)
		expect(t, r, 400, "PUT "+tc.body)
		var e struct {
			Message  string   `json:"message"`
			Problems []string `json:"problems"`
		}
		r.json(t, &e)
		if len(e.Problems) != len(tc.want) {
			t.Errorf("PUT %s %s: problems %q, want %d of them", tc.path, tc.body, e.Problems, len(tc.want))
			continue
		}
		for i, w := range tc.want {
			if !strings.Contains(e.Problems[i], w) || !strings.Contains(e.Message, w) {
				t.Errorf("PUT %s %s: problem %d %q (message %q), want %q in both", tc.path, tc.body, i, e.Problems[i], e.Message, w)
			}
		}
	}

	// List and get.
	expect(t, a.do("PUT", "/v1/schedules/b-first", `{"definition": "sched-job", "cron": "0 0 1 1 *"}`), 201, "second schedule")
	r = a.do("GET", "/v1/schedules", "")
	expect(t, r, 200, "list")
	var list httpapi.ListSchedulesResponse
	r.json(t, &list)
	var names []string
	for _, s := range list.Schedules {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, []string{"b-first", "nightly"}) || len(list.Schedules[0].NextFireTimes) != 5 {
		t.Errorf("list: %s", r.body)
	}
	expect(t, a.do("GET", "/v1/schedules/nope", ""), 404, "get unknown")

	// Pause, resume.
	r = a.do("POST", "/v1/schedules/b-first/pause", "")
	expect(t, r, 200, "pause")
	if r.json(t, &s); !s.Paused {
		t.Errorf("pause: %s", r.body)
	}
	r = a.do("POST", "/v1/schedules/b-first/resume", "{}")
	expect(t, r, 200, "resume")
	if r.json(t, &s); s.Paused {
		t.Errorf("resume: %s", r.body)
	}
	expect(t, a.do("POST", "/v1/schedules/nope/pause", ""), 404, "pause unknown")
	expect(t, a.do("POST", "/v1/schedules/nope/resume", ""), 404, "resume unknown")
	expect(t, a.do("POST", "/v1/schedules/b-first/pause", `{"x": 1}`), 400, "pause with an unknown field")

	// Trigger: one now; a second in the same second is a conflict.
	r = a.do("POST", "/v1/schedules/b-first/trigger", "")
	expect(t, r, 201, "trigger")
	inst := r.instance(t)
	id, _ := inst["id"].(string)
	if !strings.HasPrefix(id, "b-first-") || len(id) != len("b-first-20261125T040000Z") || inst["status"] != "RUNNING" {
		t.Errorf("triggered instance: %s", r.body)
	}
	if r := a.do("POST", "/v1/schedules/b-first/trigger", ""); r.status != 409 && r.status != 201 {
		t.Errorf("second trigger: %d %s", r.status, r.body)
	} else if r.status == 409 && !bytes.Contains(r.body, []byte("already triggered")) {
		t.Errorf("second trigger's message: %s", r.body)
	}
	expect(t, a.do("POST", "/v1/schedules/nope/trigger", ""), 404, "trigger unknown")

	// Backfill: one instance per fire time, idempotent, bounded.
	r = a.do("POST", "/v1/schedules/b-first/backfill", `{"from": "2020-01-01T00:00:00Z", "to": "2022-06-01T00:00:00+02:00"}`)
	expect(t, r, 200, "backfill")
	var bf httpapi.BackfillResponse
	r.json(t, &bf)
	want := []string{"b-first-20200101T000000Z", "b-first-20210101T000000Z", "b-first-20220101T000000Z"}
	if !slices.Equal(bf.Created, want) || len(bf.Existing) != 0 {
		t.Errorf("backfill: %s", r.body)
	}
	r = a.do("POST", "/v1/schedules/b-first/backfill", `{"from": "2020-01-01T00:00:00Z", "to": "2022-06-01T00:00:00Z"}`)
	expect(t, r, 200, "repeated backfill")
	r.json(t, &bf)
	if len(bf.Created) != 0 || !slices.Equal(bf.Existing, want) {
		t.Errorf("repeated backfill: %s", r.body)
	}
	r = a.do("GET", "/v1/workflows?id_prefix=b-first-2020", "")
	if r.status != 200 || !bytes.Contains(r.body, []byte("b-first-20200101T000000Z")) {
		t.Errorf("backfilled instance not listed: %d %s", r.status, r.body)
	}
	expect(t, a.do("PUT", "/v1/schedules/minutely", `{"definition": "sched-job", "cron": "* * * * *"}`), 201, "minutely")
	r = a.do("POST", "/v1/schedules/minutely/backfill", `{"from": "2020-01-01T00:00:00Z", "to": "2020-01-01T16:40:00Z"}`)
	expect(t, r, 400, "backfill of 1,001 fire times")
	if !bytes.Contains(r.body, []byte("more than 1000 fire times")) {
		t.Errorf("backfill too long: %s", r.body)
	}
	for _, b := range []string{
		`{"from": "yesterday", "to": "2020-01-01T00:00:00Z"}`,
		`{"from": "2020-01-01T00:00:00Z", "to": "2020-01-01"}`,
		`{"from": "2020-01-02T00:00:00Z", "to": "2020-01-01T00:00:00Z"}`,
		`{"from": "2020-01-01T00:00:00Z"}`,
		``,
	} {
		expect(t, a.do("POST", "/v1/schedules/minutely/backfill", b), 400, "backfill "+b)
	}
	expect(t, a.do("POST", "/v1/schedules/nope/backfill", `{"from": "2020-01-01T00:00:00Z", "to": "2020-01-02T00:00:00Z"}`), 404, "backfill unknown")

	// Delete: the schedule goes, its instances stay.
	r = a.do("DELETE", "/v1/schedules/b-first", "")
	if r.status != 204 {
		t.Errorf("delete: %d %s", r.status, r.body)
	}
	expect(t, a.do("GET", "/v1/schedules/b-first", ""), 404, "get deleted")
	expect(t, a.do("DELETE", "/v1/schedules/b-first", ""), 404, "delete twice")
	expect(t, a.do("GET", "/v1/workflows/"+want[0], ""), 200, "an instance of a deleted schedule")
}

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}
