package sw

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// calls returns the call items d started, as "ID key_of attempt".
func (d *driver) calls() []string {
	var out []string
	for _, it := range d.items {
		if it.Kind == ItemCall {
			out = append(out, fmt.Sprintf("%s %q %d", it.ID, it.KeyOf, it.Attempt))
		}
	}
	return out
}

// A try's retries issue the call again with the first item's key and the
// attempts made so far: counted from the results (a lost lease's
// redelivery counts), or one a result when it does not say.
func TestTryRetryKeepsTheCallsKey(t *testing.T) {
	d := newDriver(t, strings.Replace(retryDoc, "BACKOFF", "constant", 1))
	n := 0
	d.call = func(string, json.RawMessage) Result {
		n++
		switch n {
		case 1:
			return Result{Error: &Error{Type: ErrorType(KindRuntime), Status: 500, Detail: "boom"}}
		case 2: // delivered twice: attempts 2 and 3
			return Result{Error: &Error{Type: ErrorType(KindRuntime), Status: 500, Detail: "boom"}, Attempts: 3}
		}
		return Result{Output: json.RawMessage(`{"ok":true}`)}
	}
	d.run(`{}`)
	d.wantOutput(`{"ok":true}`)
	want := []string{`sw-1 "" 0`, `sw-3 "sw-1" 1`, `sw-5 "sw-1" 3`}
	if got := d.calls(); strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("call items %v, want %v", got, want)
	}
}

// Each iteration of a for inside a try is a call of its own (its own key);
// a call that a then runs again in the same attempt of the try is a new
// call too.
func TestTryRetryKeysPerCall(t *testing.T) {
	d := newDriver(t, ctkHead+`do:
  - tryIt:
      try:
        - each:
            for:
              in: ${ [1, 2] }
            do:
              - work:
                  call: flaky
      catch:
        errors:
          with:
            type: https://serverlessworkflow.io/dsl/errors/types/runtime
        retry:
          delay: {seconds: 1}
          limit:
            attempt: {count: 1}
`)
	n := 0
	d.call = func(string, json.RawMessage) Result {
		n++
		if n == 2 { // the second iteration fails once
			return Result{Error: &Error{Type: ErrorType(KindRuntime), Status: 500, Detail: "boom"}}
		}
		return Result{Output: json.RawMessage(`{}`)}
	}
	d.run(`{}`)
	got := d.calls()
	if len(got) != 4 {
		t.Fatalf("call items %v, want 4", got)
	}
	first, second := strings.Fields(got[0])[0], strings.Fields(got[1])[0]
	want := []string{got[0], got[1], fmt.Sprintf("%s %q 1", strings.Fields(got[2])[0], first), fmt.Sprintf("%s %q 1", strings.Fields(got[3])[0], second)}
	if strings.Join(got, ", ") != strings.Join(want, ", ") || strings.Contains(got[1], first) {
		t.Errorf("call items %v, want %v", got, want)
	}

	d = newDriver(t, ctkHead+`do:
  - tryIt:
      try:
        - work:
            call: again
        - loop:
            switch:
              - more:
                  when: ${ $context.n == null }
                  then: work
              - done:
                  then: exit
            export:
              as: '${ {n: 1} }'
      catch:
        errors:
          with:
            type: https://serverlessworkflow.io/dsl/errors/types/runtime
        retry:
          delay: {seconds: 1}
          limit:
            attempt: {count: 1}
`)
	d.call = func(string, json.RawMessage) Result { return Result{Output: json.RawMessage(`{}`)} }
	d.run(`{}`)
	for _, c := range d.calls() {
		if !strings.Contains(c, `"" 0`) {
			t.Errorf("a call run again by a then got %s, want a new call", c)
		}
	}
	if len(d.calls()) < 2 {
		t.Errorf("the then ran the call %d times, want 2", len(d.calls()))
	}
}
