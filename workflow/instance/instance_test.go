package instance

import (
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"testing"
)

func TestTransitionTable(t *testing.T) {
	allowed := map[[2]Status]bool{
		{StatusPending, StatusRunning}:   true,
		{StatusPending, StatusCancelled}: true,
		{StatusQueued, StatusRunning}:    true,
		{StatusQueued, StatusCancelled}:  true,
		{StatusRunning, StatusPaused}:    true,
		{StatusRunning, StatusCompleted}: true,
		{StatusRunning, StatusFailed}:    true,
		{StatusRunning, StatusCancelled}: true,
		{StatusRunning, StatusTimedOut}:  true,
		{StatusPaused, StatusRunning}:    true,
		{StatusPaused, StatusCancelled}:  true,
		{StatusPaused, StatusTimedOut}:   true,
		{StatusFailed, StatusRunning}:    true,
		{StatusTimedOut, StatusRunning}:  true,
	}
	// Every pair, including self-transitions, is checked against the table.
	for _, from := range Statuses {
		for _, to := range Statuses {
			if got, want := CanTransition(from, to), allowed[[2]Status{from, to}]; got != want {
				t.Errorf("CanTransition(%s, %s) = %v, want %v", from, to, got, want)
			}
		}
	}
	for _, s := range Statuses {
		terminal := s == StatusCompleted || s == StatusCancelled
		if s.Terminal() != terminal {
			t.Errorf("%s.Terminal() = %v", s, s.Terminal())
		}
		if terminal {
			for _, to := range Statuses {
				if CanTransition(s, to) {
					t.Errorf("terminal %s may move to %s", s, to)
				}
			}
		}
	}
	if CanTransition("BOGUS", StatusRunning) || CanTransition(StatusRunning, "BOGUS") {
		t.Error("unknown statuses must not transition")
	}
}

func TestParseStatus(t *testing.T) {
	for _, s := range Statuses {
		got, err := ParseStatus(string(s))
		if err != nil || got != s {
			t.Errorf("ParseStatus(%q) = %q, %v", s, got, err)
		}
	}
	for _, bad := range []string{"", "running", "DONE", " RUNNING"} {
		if _, err := ParseStatus(bad); err == nil || !strings.Contains(err.Error(), "unknown status") {
			t.Errorf("ParseStatus(%q) error = %v, want unknown status", bad, err)
		}
	}
	var s Status
	if err := json.Unmarshal([]byte(`"PAUSED"`), &s); err != nil || s != StatusPaused {
		t.Errorf("unmarshal PAUSED = %q, %v", s, err)
	}
	if err := json.Unmarshal([]byte(`"NOPE"`), &s); err == nil {
		t.Error("unmarshal of an unknown status must fail")
	}
	if err := json.Unmarshal([]byte(`3`), &s); err == nil {
		t.Error("unmarshal of a number as status must fail")
	}
}

func TestIDValidation(t *testing.T) {
	long := strings.Repeat("a", MaxIDLength)
	for _, ok := range []string{"a", "A-1", "x.y_z", long, "0193f0c2-7b3a-7cc1-9c1e-0d3b2f4a5e6f"} {
		if err := ValidateStepID(ok); err != nil {
			t.Errorf("ValidateStepID(%q) = %v", ok, err)
		}
		if err := ValidateInstanceID(ok); err != nil {
			t.Errorf("ValidateInstanceID(%q) = %v", ok, err)
		}
	}
	if err := ValidateInstanceID("order:42"); err != nil {
		t.Errorf("a colon is allowed in instance ids: %v", err)
	}
	if err := ValidateStepID("order:42"); !errors.Is(err, ErrInvalidID) {
		t.Errorf("a colon is not allowed in step ids: %v", err)
	}
	for _, bad := range []string{"", long + "a", "a,b", "b}", `"x"`, "{steps}", "a b", "é", "$.x", "a/b", "' OR '1'='1", ".", ".."} {
		if err := ValidateStepID(bad); !errors.Is(err, ErrInvalidID) {
			t.Errorf("ValidateStepID(%q) = %v, want ErrInvalidID", bad, err)
		}
		if err := ValidateInstanceID(bad); !errors.Is(err, ErrInvalidID) {
			t.Errorf("ValidateInstanceID(%q) = %v, want ErrInvalidID", bad, err)
		}
	}
	err := ValidateStepID("a,b")
	if !strings.Contains(err.Error(), `','`) || !strings.Contains(err.Error(), "offset 1") {
		t.Errorf("error should name the character and its offset: %v", err)
	}
}

func TestStateRoundTripIsExact(t *testing.T) {
	in := `{"variables":{"big":9007199254740993,"f":1.50,"s":"x"},"steps":{"a":{"status":"COMPLETED","output":{"n":12345678901234567890},"attempts":2,"note":"kept"},"b.c":{"status":"FAILED","error":"boom","attempts":3}},"custom":{"k":[1,2]}}`
	s, err := ParseState([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"big":9007199254740993`, `"f":1.50`, `12345678901234567890`, `"note":"kept"`, `"custom":{"k":[1,2]}`, `"b.c":{`, `"error":"boom"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("round trip lost %s: %s", want, out)
		}
	}
	var big int64
	if ok, err := s.Var("big", &big); !ok || err != nil || big != 9007199254740993 {
		t.Errorf("Var(big) = %d, %v, %v", big, ok, err)
	}
}

func TestStateDefaultsAndValidation(t *testing.T) {
	s, err := ParseState(nil)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(s)
	if string(out) != `{"steps":{},"variables":{}}` {
		t.Errorf("empty state = %s", out)
	}
	cases := map[string]string{
		`[]`:                                "state must be a JSON object",
		`{"variables":[1]}`:                 "state.variables must be a JSON object",
		`{"steps":"x"}`:                     "state.steps must be a JSON object",
		`{"steps":{"a":5}}`:                 "a step must be a JSON object",
		`{"steps":{"a":{"status":"DONE"}}}`: `status "DONE" is not a step status`,
		`{"steps":{"a,b":{}}}`:              "step id",
		`{"steps":{"a":{"attempts":-1}}}`:   "attempts must not be negative",
		`{"steps":{"a":{"attempts":"x"}}}`:  `step field "attempts" has the wrong type`,
	}
	for in, want := range cases {
		_, err := ParseState([]byte(in))
		if !errors.Is(err, ErrInvalidState) || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseState(%s) = %v, want ErrInvalidState mentioning %q", in, err, want)
		}
	}
	s, err = ParseState([]byte(`{"steps":{"a":{}}}`))
	if err != nil || s.Steps["a"].Status != StepPending {
		t.Errorf("a step without status is PENDING: %+v, %v", s.Steps["a"], err)
	}
}

func TestCompleteStep(t *testing.T) {
	s, err := ParseState([]byte(`{"steps":{"a":{"status":"FAILED","error":"x","attempts":1},"b":{"status":"COMPLETED","output":1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CompleteStep("a", json.RawMessage(`{"ok":true}`)); err != nil {
		t.Fatal(err)
	}
	a := s.Steps["a"]
	if a.Status != StepCompleted || string(a.Output) != `{"ok":true}` || a.Error != "" || a.Attempts != 1 {
		t.Errorf("step a = %+v", a)
	}
	if err := s.CompleteStep("b", json.RawMessage(`2`)); !errors.Is(err, ErrStepCompleted) {
		t.Errorf("completing b again = %v, want ErrStepCompleted", err)
	}
	if string(s.Steps["b"].Output) != "1" {
		t.Errorf("b's output was overwritten: %s", s.Steps["b"].Output)
	}
	if err := s.CompleteStep("zzz", nil); !errors.Is(err, ErrUnknownStep) {
		t.Errorf("unknown step = %v, want ErrUnknownStep", err)
	}
	s2, _ := ParseState([]byte(`{"steps":{"c":{}}}`))
	if err := s2.CompleteStep("c", nil); err != nil || string(s2.Steps["c"].Output) != "null" {
		t.Errorf("nil output should become null: %v %s", err, s2.Steps["c"].Output)
	}
}

func TestCloneIsDeep(t *testing.T) {
	s, _ := ParseState([]byte(`{"variables":{"n":1},"steps":{"a":{"output":[1]}},"x":2}`))
	c := s.Clone()
	if err := c.SetVar("n", 2); err != nil {
		t.Fatal(err)
	}
	c.Steps["a"].Status = StepCompleted
	c.Steps["a"].Output = append(c.Steps["a"].Output[:2], ",2]"...)
	c.Extra["x"][0] = '3'
	var n int
	s.Var("n", &n)
	if n != 1 || s.Steps["a"].Status != StepPending || string(s.Steps["a"].Output) != "[1]" || string(s.Extra["x"]) != "2" {
		t.Errorf("clone shares memory with the original: n=%d %+v %s", n, s.Steps["a"], s.Extra["x"])
	}
	if string(c.Steps["a"].Output) != "[1,2]" {
		t.Errorf("the clone's output %s, want [1,2]", c.Steps["a"].Output)
	}
}

func TestCancelActiveSteps(t *testing.T) {
	cases := []struct {
		name, in, want string
		changed        bool
	}{
		{"running and waiting become cancelled",
			`{"steps":{"a":{"status":"RUNNING","attempts":2,"error":"try 1 failed"},"b":{"status":"WAITING"}}}`,
			`{"steps":{"a":{"attempts":2,"error":"try 1 failed","status":"CANCELLED"},"b":{"attempts":0,"status":"CANCELLED"}},"variables":{}}`, true},
		{"finished and pending steps keep their status",
			`{"steps":{"p":{},"c":{"status":"COMPLETED","output":1},"f":{"status":"FAILED","error":"x"},"s":{"status":"SKIPPED"},"k":{"status":"CANCELLED"}}}`,
			`{"steps":{"c":{"attempts":0,"output":1,"status":"COMPLETED"},"f":{"attempts":0,"error":"x","status":"FAILED"},"k":{"attempts":0,"status":"CANCELLED"},"p":{"attempts":0,"status":"PENDING"},"s":{"attempts":0,"status":"SKIPPED"}},"variables":{}}`, false},
		{"no steps", `{"variables":{"x":1}}`, `{"steps":{},"variables":{"x":1}}`, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseState([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if got := s.CancelActiveSteps(); got != tc.changed {
				t.Errorf("changed = %v, want %v", got, tc.changed)
			}
			out, _ := json.Marshal(s)
			if string(out) != tc.want {
				t.Errorf("state = %s\nwant    %s", out, tc.want)
			}
			if err := s.Validate(); err != nil {
				t.Errorf("CANCELLED must be a valid step status: %v", err)
			}
		})
	}
}

// CancelActiveSteps puts new records: a state that shares its records
// with another (a decision's copy of an instance) leaves the other's as
// they were.
func TestCancelActiveStepsLeavesSharedRecords(t *testing.T) {
	s, err := ParseState([]byte(`{"steps":{"a":{"status":"RUNNING"},"b":{"status":"COMPLETED","output":1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	shared := s
	shared.Steps = maps.Clone(s.Steps)
	shared.CancelActiveSteps()
	if s.Steps["a"].Status != StepRunning || shared.Steps["a"].Status != StepCancelled {
		t.Errorf("a: %s in the original, %s in the copy; want RUNNING, CANCELLED", s.Steps["a"].Status, shared.Steps["a"].Status)
	}
	if s.Steps["b"] != shared.Steps["b"] {
		t.Error("a record CancelActiveSteps did not change was replaced")
	}
}

func TestStopsSteps(t *testing.T) {
	want := map[Status]bool{StatusPending: false, StatusRunning: false, StatusPaused: false,
		StatusCompleted: true, StatusCancelled: true, StatusFailed: true, StatusTimedOut: true}
	for _, s := range Statuses {
		if s.StopsSteps() != want[s] {
			t.Errorf("%s.StopsSteps() = %v, want %v", s, s.StopsSteps(), want[s])
		}
	}
	for _, s := range StopStatuses {
		if !s.StopsSteps() {
			t.Errorf("StopStatuses holds %s", s)
		}
	}
	for _, s := range StepStatuses {
		if s.Active() != (s == StepRunning || s == StepWaiting) {
			t.Errorf("%s.Active() = %v", s, s.Active())
		}
	}
	if _, err := ParseState([]byte(`{"steps":{"a":{"status":"CANCELLED"}}}`)); err != nil {
		t.Errorf("a CANCELLED step is valid: %v", err)
	}
}

func TestStepStateEqual(t *testing.T) {
	base := func() *StepState {
		return &StepState{Status: StepCompleted, Attempts: 2, Output: json.RawMessage(`{"a":1}`), Error: "",
			Extra: map[string]json.RawMessage{"iterations": json.RawMessage(`{"total":1}`)}}
	}
	if !base().Equal(base()) || !(*StepState)(nil).Equal(nil) {
		t.Fatal("equal steps compare unequal")
	}
	for name, change := range map[string]func(*StepState){
		"status":       func(s *StepState) { s.Status = StepFailed },
		"attempts":     func(s *StepState) { s.Attempts++ },
		"error":        func(s *StepState) { s.Error = "boom" },
		"output":       func(s *StepState) { s.Output = json.RawMessage(`{"a":2}`) },
		"no output":    func(s *StepState) { s.Output = nil },
		"extra value":  func(s *StepState) { s.Extra["iterations"] = json.RawMessage(`{"total":2}`) },
		"extra member": func(s *StepState) { s.Extra["foreach"] = json.RawMessage(`{}`) },
		"extra gone":   func(s *StepState) { s.Extra = nil },
	} {
		changed := base()
		change(changed)
		if base().Equal(changed) || changed.Equal(base()) {
			t.Errorf("a step whose %s changed compares equal", name)
		}
	}
	if base().Equal(nil) || (*StepState)(nil).Equal(base()) {
		t.Error("a step compares equal to nil")
	}
}

// Encode marks the outputs it checked; a mark holds for the same slice
// only, so an output assigned since, even of the same length, is checked
// and written anew.
func TestEncodeMarksOutputsBySlice(t *testing.T) {
	s := State{Steps: map[string]*StepState{
		"a": {Status: StepCompleted, Output: json.RawMessage(`{"x": 1 , "h":"<"}`)},
		"b": {Status: StepCompleted, Output: json.RawMessage(`[1,2]`)},
	}}
	first, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"steps":{"a":{"attempts":0,"output":{"x":1,"h":"\u003c"},"status":"COMPLETED"},"b":{"attempts":0,"output":[1,2],"status":"COMPLETED"}},"variables":{}}`
	if string(first) != want {
		t.Fatalf("Encode = %s, want %s", first, want)
	}
	if got := string(s.Steps["a"].Output); got != `{"x":1,"h":"\u003c"}` {
		t.Errorf("an output Encode compacted is kept as written, got %s", got)
	}
	if !s.Steps["a"].outputWritten() || !s.Steps["b"].outputWritten() {
		t.Fatal("Encode marked no output")
	}
	c := s.Clone()
	if !c.Steps["b"].outputWritten() {
		t.Error("Clone dropped the mark of an output it copied")
	}

	// Same length, another slice: checked again, so an invalid value is
	// refused and a valid one written.
	c.Steps["b"].Output = json.RawMessage(`[1,2`)
	if _, err := c.MarshalJSON(); err == nil {
		t.Error("MarshalJSON of an invalid output assigned after Encode: want an error")
	}
	c.Steps["b"].Output = json.RawMessage(`[3,4]`)
	if got, err := c.MarshalJSON(); err != nil || !strings.Contains(string(got), `"output":[3,4]`) {
		t.Errorf("MarshalJSON after a new output = %s, %v", got, err)
	}
	// MarshalJSON marks nothing: the state may be shared.
	if c.Steps["b"].outputWritten() {
		t.Error("MarshalJSON marked an output")
	}
}
