package storetest

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// LegacyInstance is an instance's history as a schema that stored every
// state whole wrote it: the stores' migration tests insert these rows
// before migrating and check History afterwards.
type LegacyInstance struct {
	ID string
	// States are the versions' states (JSON objects), version 0 first.
	States []string
}

// LegacyHistories returns histories to write with a previous schema:
// nulls, arrays, nested objects, states that grow (so that the migration
// stores patches) and one that shrinks, and an instance with one version.
func LegacyHistories() []LegacyInstance {
	growing := []string{`{"steps":{},"variables":{}}`}
	steps := []string{}
	for i := range 12 {
		steps = append(steps, fmt.Sprintf(`"s%02d":{"attempts":1,"output":{"blob":%q,"n":null},"status":"COMPLETED"}`, i, strings.Repeat(fmt.Sprint(i%10), 600)))
		growing = append(growing, `{"steps":{`+strings.Join(steps, ",")+`},"variables":{"i":`+fmt.Sprint(i)+`,"nil":null}}`)
	}
	return []LegacyInstance{
		{ID: "legacy-growing", States: growing},
		{ID: "legacy-mixed", States: []string{
			`{"steps":{},"variables":{"a":null,"list":[1,2,3]}}`,
			`{"steps":{},"variables":{"a":{"b":null},"list":[1,2,3]}}`,
			`{"steps":{},"variables":{"a":{"b":null,"c":[null]},"list":[1]}}`,
			`{"meta":{"x":1.0},"steps":{"x":{"attempts":0,"status":"PENDING"}},"variables":{"a":{"c":[null]},"list":[]}}`,
			`{"steps":{},"variables":{}}`,
		}},
		{ID: "legacy-single", States: []string{`{"steps":{},"variables":{"only":null}}`}},
	}
}

// WholeStates returns states, each a whole state as a schema before
// history patches stores it, as History gives them back (as the state
// encoder writes them): what a test expects of History once it reads
// such rows. (History itself reads today's schema only.)
func WholeStates(t *testing.T, states []string) [][]byte {
	t.Helper()
	out := make([][]byte, len(states))
	for i, raw := range states {
		var st workflow.State
		if err := st.UnmarshalJSON([]byte(raw)); err != nil {
			t.Fatalf("state %d: %v", i, err)
		}
		b, err := st.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		out[i] = b
	}
	return out
}

// HistoryStates returns the states of id's versions as History gives them
// (as the state encoder writes them), version 0 first.
func HistoryStates(t *testing.T, s store.Backend, id string) [][]byte {
	t.Helper()
	hist, err := s.History(t.Context(), id, 0, 0)
	if err != nil {
		t.Fatalf("History(%s): %v", id, err)
	}
	out := make([][]byte, len(hist))
	for i, e := range hist {
		if e.Version != int64(i) {
			t.Fatalf("History(%s)[%d] is version %d", id, i, e.Version)
		}
		if out[i], err = e.State.MarshalJSON(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// CheckHistory checks that History of id gives back want exactly, from
// every since.
func CheckHistory(t *testing.T, s store.Backend, id string, want [][]byte) {
	t.Helper()
	for since := range want {
		hist, err := s.History(t.Context(), id, int64(since), 0)
		if err != nil {
			t.Fatalf("History(%s, since %d): %v", id, since, err)
		}
		if len(hist) != len(want)-since {
			t.Fatalf("History(%s, since %d) = %d versions, want %d", id, since, len(hist), len(want)-since)
		}
		for i, e := range hist {
			got, err := e.State.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			if v := since + i; e.Version != int64(v) || !bytes.Equal(got, want[v]) {
				t.Fatalf("History(%s, since %d) version %d = %s, want version %d %s", id, since, e.Version, got, v, want[v])
			}
		}
	}
}
