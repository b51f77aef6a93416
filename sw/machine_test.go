package sw

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestGotoBackwardsLoop(t *testing.T) {
	d := newDriver(t, ctkHead+`do:
  - inc:
      set:
        n: ${ .n + 1 }
  - check:
      switch:
        - more:
            when: .n < 3
            then: inc
        - done:
            then: continue
  - last:
      set:
        n: ${ .n * 10 }
`)
	d.run(`{"n":0}`)
	d.wantOutput(`{"n":30}`)
	d.wantCauses("workflow started",
		"task /do/0/inc completed", "task /do/1/check completed",
		"task /do/0/inc completed", "task /do/1/check completed",
		"task /do/0/inc completed", "task /do/1/check completed",
		"task /do/2/last completed")
}

func TestExitLeavesTheComposite(t *testing.T) {
	d := newDriver(t, ctkHead+`do:
  - inner:
      do:
        - a:
            set:
              a: 1
            then: exit
        - b:
            set:
              b: 2
  - after:
      set:
        a: ${ .a }
        after: true
`)
	d.run(`{}`)
	d.wantOutput(`{"a":1,"after":true}`)
	d.wantCauses("workflow started", "task /do/0/inner/do/0/a completed", "task /do/0/inner completed", "task /do/1/after completed")
}

func TestEndEndsTheWorkflowFromInsideAComposite(t *testing.T) {
	d := newDriver(t, ctkHead+`do:
  - inner:
      do:
        - a:
            set:
              a: 1
            then: end
        - b:
            set:
              b: 2
  - after:
      set:
        after: true
`)
	d.run(`{}`)
	d.wantOutput(`{"a":1}`)
	d.wantCauses("workflow started", "task /do/0/inner/do/0/a completed")
}

func TestForWhileAndNestedFor(t *testing.T) {
	d := newDriver(t, ctkHead+`do:
  - sum:
      for:
        in: .numbers
      while: .total < 5
      do:
        - add:
            set:
              total: ${ .total + $item }
`)
	d.run(`{"numbers":[1,2,3,4],"total":0}`)
	d.wantOutput(`{"total":6}`) // 1+2 = 3 < 5, +3 = 6, then while is false

	d = newDriver(t, ctkHead+`do:
  - rows:
      for:
        each: row
        at: i
        in: .rows
      do:
        - cols:
            for:
              each: col
              in: $row
            do:
              - cell:
                  set:
                    cells: ${ .cells + ["\($i):\($col)"] }
`)
	d.run(`{"rows":[["a","b"],["c"]],"cells":[]}`)
	d.wantOutput(`{"cells":["0:a","0:b","1:c"]}`)

	d = newDriver(t, ctkHead+`do:
  - none:
      for:
        in: .empty
      do:
        - never:
            set:
              x: 1
`)
	d.run(`{"empty":[]}`)
	d.wantOutput(`{"empty":[]}`)
	d.wantCauses("workflow started", "task /do/0/none completed") // nothing to iterate: the for finishes at once, in its own version
}

func TestForkWithoutCompete(t *testing.T) {
	d := newDriver(t, ctkHead+`do:
  - both:
      fork:
        branches:
          - getPet:
              call: http
              with:
                method: get
                endpoint: https://petstore.swagger.io/v2/pet/7
              output:
                as: .id
          - local:
              set:
                local: true
`)
	d.http = petstore
	d.run(`{}`)
	d.wantOutput(`[7,{"local":true}]`)
	d.wantCauses("workflow started", "task /do/0/both/fork/branches/0/getPet completed", "task /do/0/both/fork/branches/1/local completed",
		"task /do/0/both completed")
}

func TestForkCompeteCancelsTheLosers(t *testing.T) {
	d := newDriver(t, ctkHead+`do:
  - race:
      fork:
        compete: true
        branches:
          - slow:
              wait: PT1H
          - fast:
              call: work
`)
	d.call = func(string, json.RawMessage) Result { return Result{Output: json.RawMessage(`"fast"`)} }
	d.run(`{}`)
	d.wantOutput(`"fast"`)
	if len(d.cancels) != 1 || d.cancels[0] != "sw-1" {
		t.Errorf("cancel = %v, want the wait's timer sw-1", d.cancels)
	}
	if len(d.rt.Items) != 0 {
		t.Errorf("pending: %v", d.rt.Items)
	}
}

const retryDoc = ctkHead + `do:
  - tryIt:
      try:
        - work:
            call: flaky
      catch:
        errors:
          with:
            type: https://serverlessworkflow.io/dsl/errors/types/runtime
        retry:
          delay:
            seconds: 2
          backoff:
            BACKOFF: {}
          limit:
            attempt:
              count: 3
`

func TestTryRetryBackoff(t *testing.T) {
	for _, tc := range []struct {
		backoff string
		delays  []time.Duration
	}{
		{"constant", []time.Duration{2 * time.Second, 2 * time.Second, 2 * time.Second}},
		{"linear", []time.Duration{2 * time.Second, 4 * time.Second, 6 * time.Second}},
		{"exponential", []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second}},
	} {
		t.Run(tc.backoff, func(t *testing.T) {
			// Fails three times, then succeeds: three retries, each after its delay.
			d := newDriver(t, strings.Replace(retryDoc, "BACKOFF", tc.backoff, 1))
			calls := 0
			d.call = func(string, json.RawMessage) Result {
				calls++
				if calls <= 3 {
					return Result{Error: &Error{Type: ErrorType(KindRuntime), Status: 500, Detail: "boom"}}
				}
				return Result{Output: json.RawMessage(`{"ok":true}`)}
			}
			d.run(`{}`)
			d.wantOutput(`{"ok":true}`)
			if calls != 4 {
				t.Errorf("calls = %d, want 4", calls)
			}
			var timers []time.Time
			for _, it := range d.items {
				if it.Kind == ItemTimer {
					timers = append(timers, it.RunAt)
				}
			}
			if len(timers) != 3 {
				t.Fatalf("timers %v", timers)
			}
			at := t0
			for i, want := range tc.delays {
				at = at.Add(want)
				if !timers[i].Equal(at) {
					t.Errorf("retry %d at %v, want %v", i+1, timers[i], at)
				}
			}
			d.wantCauses("workflow started",
				"task /do/0/tryIt/try/0/work faulted: boom", "task /do/0/tryIt started",
				"task /do/0/tryIt/try/0/work faulted: boom", "task /do/0/tryIt started",
				"task /do/0/tryIt/try/0/work faulted: boom", "task /do/0/tryIt started",
				"task /do/0/tryIt/try/0/work completed", "task /do/0/tryIt completed")
		})
	}
}

func TestTryRetryExhaustedFaults(t *testing.T) {
	d := newDriver(t, strings.Replace(retryDoc, "BACKOFF", "constant", 1))
	calls := 0
	d.call = func(string, json.RawMessage) Result {
		calls++
		return Result{Error: &Error{Type: ErrorType(KindRuntime), Status: 500, Detail: "boom"}}
	}
	d.run(`{}`)
	if calls != 4 {
		t.Errorf("calls = %d, want 4 (the first and three retries)", calls)
	}
	d.wantFault(Error{Type: ErrorType(KindRuntime), Status: 500, Detail: "boom", Instance: "/do/0/tryIt/try/0/work"})
}

func TestCatchWhenExceptWhenAndDo(t *testing.T) {
	doc := ctkHead + `do:
  - tryIt:
      input:
        from: '{ tried: true }'
      try:
        - work:
            call: handler
      catch:
        as: failure
        exceptWhen: $failure.status == 409
        do:
          - handle:
              set:
                handled: ${ $failure.detail }
                input: ${ . }
`
	for _, tc := range []struct {
		status int
		caught bool
	}{{500, true}, {409, false}} {
		d := newDriver(t, doc)
		d.call = func(h string, in json.RawMessage) Result {
			return Result{Error: &Error{Type: ErrorType(KindRuntime), Status: tc.status, Detail: "handler " + h + " failed"}}
		}
		d.run(`{"x":1}`)
		if tc.caught {
			d.wantOutput(`{"handled":"handler handler failed","input":{"tried":true}}`)
		} else {
			d.wantFault(Error{Type: ErrorType(KindRuntime), Status: 409, Detail: "handler handler failed", Instance: "/do/0/tryIt/try/0/work"})
		}
	}
}

func TestCaughtWithoutDoOutputsTheTryInput(t *testing.T) {
	d := newDriver(t, ctkHead+`do:
  - tryIt:
      try:
        - boom:
            raise:
              error:
                type: https://example.com/boom
                status: 418
      catch:
        errors:
          with:
            type: https://example.com/boom
        when: $error.status == 418
`)
	d.run(`{"keep":1}`)
	d.wantOutput(`{"keep":1}`)
	d.wantCauses("workflow started", "task /do/0/tryIt/try/0/boom faulted: https://example.com/boom", "task /do/0/tryIt completed")
}

func TestListenAllAndAny(t *testing.T) {
	ev := func(typ, subject, data string) json.RawMessage {
		return json.RawMessage(`{"id":"e","type":"` + typ + `","subject":"` + subject + `","data":` + data + `}`)
	}
	d := newDriver(t, ctkHead+`do:
  - both:
      listen:
        to:
          all:
            - with:
                type: temp
            - with:
                type: bpm
                subject: patient-1
`)
	d.events = []json.RawMessage{ev("bpm", "patient-1", `{"bpm":70}`), ev("temp", "", `{"t":39}`)}
	d.run(`{}`)
	d.wantOutput(`[{"t":39},{"bpm":70}]`)
	d.wantCauses("workflow started", "task /do/0/both received event", "task /do/0/both completed")
	if d.items[1].Event != "bpm" || d.items[1].Key != "patient-1" {
		t.Errorf("listen item %+v", d.items[1])
	}

	d = newDriver(t, ctkHead+`do:
  - either:
      listen:
        to:
          any:
            - with:
                type: a
            - with:
                type: b
        read: envelope
`)
	d.events = []json.RawMessage{ev("b", "", `1`)}
	d.run(`{}`)
	d.wantOutput(`[{"id":"e","type":"b","subject":"","data":1}]`)
	if len(d.last.Cancel) != 1 || d.last.Cancel[0] != "sw-1" {
		t.Errorf("cancel %v, want the other listen item", d.last.Cancel)
	}

	d = newDriver(t, ctkHead+`do:
  - until:
      listen:
        to:
          any:
            - with:
                type: a
          until: length >= 2
`)
	d.events = []json.RawMessage{ev("a", "", `1`), ev("a", "", `2`), ev("a", "", `3`)}
	d.run(`{}`)
	d.wantOutput(`[1,2]`)
	d.wantCauses("workflow started", "task /do/0/until received event", "task /do/0/until completed")

	d = newDriver(t, ctkHead+`do:
  - one:
      listen:
        to:
          one:
            with:
              type: a
`)
	d.events = []json.RawMessage{ev("a", "", `{"v":1}`)}
	d.run(`{}`)
	d.wantOutput(`[{"v":1}]`)
}

func TestCallHandlerFailureCaught(t *testing.T) {
	d := newDriver(t, ctkHead+`do:
  - tryIt:
      try:
        - charge:
            call: payments.charge
            with:
              amount: ${ .amount }
      catch:
        errors:
          with:
            type: https://serverlessworkflow.io/spec/1.0.0/errors/runtime
            status: 500
        do:
          - note:
              set:
                failed: ${ $error.detail }
`)
	var gotInput string
	d.call = func(h string, in json.RawMessage) Result {
		gotInput = h + " " + string(in)
		return Result{Error: &Error{Type: ErrorType(KindRuntime), Status: 500, Detail: "card declined"}}
	}
	d.run(`{"amount":12345678901234567890}`)
	d.wantOutput(`{"failed":"card declined"}`)
	if gotInput != `payments.charge {"amount":12345678901234567890}` {
		t.Errorf("handler input %s", gotInput)
	}
}

func TestRaiseReusableError(t *testing.T) {
	d := newDriver(t, ctkHead+`use:
  errors:
    notImplemented:
      type: https://serverlessworkflow.io/errors/not-implemented
      status: 500
      title: Not Implemented
      detail: ${ "The workflow '\( $workflow.definition.document.name ):\( $workflow.definition.document.version )' is a work in progress" }
do:
  - notImplemented:
      raise:
        error: notImplemented
`)
	d.run(`{}`)
	d.wantFault(Error{Type: "https://serverlessworkflow.io/errors/not-implemented", Status: 500, Title: "Not Implemented",
		Detail: "The workflow 'ctk:1.0.0' is a work in progress", Instance: "/do/0/notImplemented"})
}

func TestIfSkips(t *testing.T) {
	d := newDriver(t, ctkHead+`do:
  - maybe:
      if: .go
      set:
        went: true
  - external:
      if: ${ .go }
      call: never
  - last:
      set:
        last: ${ . }
`)
	d.run(`{"go":false}`)
	d.wantOutput(`{"last":{"go":false}}`)
	d.wantCauses("workflow started", "task /do/0/maybe skipped", "task /do/1/external skipped", "task /do/2/last completed")

	// A true if: the tick starts the external item, its result completes it.
	d = newDriver(t, ctkHead+`do:
  - external:
      if: ${ .go }
      call: work
`)
	d.call = func(string, json.RawMessage) Result { return Result{Output: json.RawMessage(`"done"`)} }
	d.run(`{"go":true}`)
	d.wantOutput(`"done"`)
	d.wantCauses("workflow started", "task /do/0/external started", "task /do/0/external completed")
}

func TestExportContextAndWorkflowOutput(t *testing.T) {
	d := newDriver(t, ctkHead+`input:
  from: .order
do:
  - first:
      set:
        id: ${ .id }
      export:
        as: '$context + { orderId: .id }'
  - second:
      set:
        seen: ${ $context.orderId }
        task: ${ $task.name }
        ref: ${ $task.reference }
        wf: ${ $workflow.id }
        runtime: ${ $runtime.name }
output:
  as: '{ result: ., ctx: $context }'
`)
	d.run(`{"order":{"id":42}}`)
	d.wantOutput(`{"result":{"seen":42,"task":"second","ref":"/do/1/second","wf":"wf1","runtime":"flowd"},"ctx":{"orderId":42}}`)
	jsonEqual(t, "context", d.rt.Context, `{"orderId":42}`)
}

func TestExpressionErrorFaultsAtTheTask(t *testing.T) {
	d := newDriver(t, ctkHead+`do:
  - ok:
      set:
        a: 1
  - bad:
      set:
        b: ${ .a | error("nope") }
`)
	d.run(`{}`)
	if d.last.Fault == nil {
		t.Fatal("no fault")
	}
	f := *d.last.Fault
	if f.Type != ErrorType(KindExpression) || f.Status != 400 || f.Instance != "/do/1/bad" || !strings.Contains(f.Detail, "nope") {
		t.Errorf("fault %+v", f)
	}
	d.wantCauses("workflow started", "task /do/0/ok completed", "task /do/1/bad faulted: Expression failed: set: b: error: nope")

	// An external leaf whose arguments fail starts as a tick; the tick faults.
	d = newDriver(t, ctkHead+`do:
  - bad:
      call: h
      with:
        x: ${ error("nope") }
`)
	d.run(`{}`)
	if d.last.Fault == nil || d.last.Fault.Instance != "/do/0/bad" || d.items[0].Kind != ItemTick {
		t.Errorf("fault %+v, items %+v", d.last.Fault, d.items)
	}
	d.wantCauses("workflow started", "task /do/0/bad faulted: Expression failed: with: x: error: nope")
}

func TestResumeStaleItem(t *testing.T) {
	w, err := Parse([]byte(ctkHead + "do:\n  - a:\n      set:\n        a: 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	env := Env{Now: t0}
	rt, st, err := w.Start(env, json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	id := st.Start[0].ID
	if _, err := w.Resume(env, rt, "sw-99", Result{}); !errors.Is(err, ErrNotPending) {
		t.Errorf("unknown id: %v", err)
	}
	if _, err := w.Resume(env, rt, id, Result{}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Resume(env, rt, id, Result{}); !errors.Is(err, ErrNotPending) {
		t.Errorf("second delivery: %v", err)
	}
}

func TestRuntimeJSONRoundTripMidRun(t *testing.T) {
	d := newDriver(t, ctkHead+`do:
  - loop:
      for:
        in: .items
      do:
        - tryIt:
            try:
              - work:
                  call: h
                  with:
                    n: ${ $item }
            catch:
              retry:
                delay: PT1S
                limit:
                  attempt:
                    count: 1
  - both:
      fork:
        branches:
          - w:
              wait:
                milliseconds: 10
          - s:
              set:
                s: 1
`)
	fails := map[string]bool{}
	d.call = func(_ string, in json.RawMessage) Result {
		if !fails[string(in)] {
			fails[string(in)] = true
			return Result{Error: &Error{Type: ErrorType(KindRuntime), Status: 500}}
		}
		return Result{Output: in}
	}
	// After every step the state is written and read back, as a crash and
	// a restart would do.
	d.after = func(d *driver) {
		if d.rt == nil {
			return
		}
		b, err := json.Marshal(d.rt)
		if err != nil {
			t.Fatal(err)
		}
		var back Runtime
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		b2, _ := json.Marshal(&back)
		if string(b) != string(b2) {
			t.Fatalf("round trip changed the state:\n%s\n%s", b, b2)
		}
		d.rt = &back
	}
	d.run(`{"items":[1,2]}`)
	d.wantOutput(`[{"n":2},{"s":1}]`)
	var top map[string]json.RawMessage
	b, _ := json.Marshal(d.rt)
	_ = json.Unmarshal(b, &top)
	for _, k := range []string{"seq", "context", "pending"} {
		if _, ok := top[k]; !ok {
			t.Errorf("runtime JSON has no %q: %s", k, b)
		}
	}
}

func TestTaskTimeout(t *testing.T) {
	d := newDriver(t, ctkHead+`do:
  - guarded:
      try:
        - waitForIt:
            listen:
              to:
                one:
                  with:
                    type: never
            timeout:
              after: PT5M
      catch:
        errors:
          with:
            type: https://serverlessworkflow.io/spec/1.0.0/errors/timeout
        do:
          - late:
              set:
                timedOut: ${ $error.instance }
`)
	d.run(`{}`)
	d.wantOutput(`{"timedOut":"/do/0/guarded/try/0/waitForIt"}`)
	if len(d.cancels) != 1 || d.cancels[0] != "sw-2" {
		t.Errorf("cancelled %v, want the listen item sw-2", d.cancels)
	}
	d.wantCauses("workflow started", "task /do/0/guarded/try/0/waitForIt faulted: Timeout: the task did not finish within its timeout", "task /do/0/guarded/catch/do/0/late completed",
		"task /do/0/guarded completed")
}

func TestChildWaitAndItemTimeouts(t *testing.T) {
	d := newDriver(t, ctkHead+`do:
  - pause:
      wait:
        minutes: 2
  - register:
      run:
        workflow:
          namespace: test
          name: register-customer
          version: '0.1.0'
          input:
            customer: ${ .user }
      timeout:
        after: PT30S
  - pauseAgain:
      wait: PT0S
`)
	var child Item
	d.child = func(it Item) Result { child = it; return Result{Output: json.RawMessage(`{"registered":true}`)} }
	d.run(`{"user":{"name":"ann"}}`)
	d.wantOutput(`{"registered":true}`)
	if child.Kind != ItemChild || child.Definition != "register-customer" || string(child.Input) != `{"customer":{"name":"ann"}}` || child.Timeout != 30*time.Second {
		t.Errorf("child item %+v", child)
	}
	if d.items[0].Kind != ItemTimer || !d.items[0].RunAt.Equal(t0.Add(2*time.Minute)) {
		t.Errorf("wait item %+v", d.items[0])
	}
	d.wantCauses("workflow started", "task /do/0/pause completed", "task /do/1/register completed", "task /do/2/pauseAgain completed")
}

func TestItemJSONShape(t *testing.T) {
	b, err := json.Marshal(Item{ID: "sw-1", Kind: ItemListen, Pointer: "/do/0/a", Event: "e", Key: "k"})
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, "item", b, `{"id":"sw-1","kind":"listen","pointer":"/do/0/a","event":"e","key":"k"}`)
	b, _ = json.Marshal(Item{ID: "sw-2", Kind: ItemTimer, Pointer: "/do/0/a", RunAt: t0, Timeout: time.Second})
	jsonEqual(t, "item", b, `{"id":"sw-2","kind":"timer","pointer":"/do/0/a","run_at":"2026-01-02T03:04:05Z","timeout":1000000000}`)
}

func TestExpressionTimeBounded(t *testing.T) {
	d := newDriver(t, ctkHead+`do:
  - spin:
      set:
        n: '${ def f: f; f }'
`)
	d.run(`{}`)
	if d.last.Fault == nil || !strings.Contains(d.last.Fault.Detail, "took longer than") || d.last.Fault.Instance != "/do/0/spin" {
		t.Errorf("fault %+v", d.last.Fault)
	}
}

// TestExpressionMemoryBounded: a runtime expression (a set, a switch
// condition, an input.from) that would build a value larger than the
// state limit faults the workflow at its place with an error naming the
// expression and the limit, which the environment gives.
func TestExpressionMemoryBounded(t *testing.T) {
	for _, tc := range []struct {
		doc, at, want string
		maxState      int
	}{
		{`do:
  - grow:
      set:
        n: '${ ("x" * 1000000000) | length }'
`, "/do/0/grow", "set: n: expression \"(\\\"x\\\" * 1000000000) | length\": `*` would build a value of 1000000002 bytes, over --max-state-bytes (4194304 bytes)", 0},
		{`do:
  - pick:
      switch:
        - big:
            when: '${ [range(1e9)] | length > 0 }'
            then: end
`, "/do/0/pick", "would make the evaluation hold more than 262144 bytes (4 × --max-state-bytes)", 1 << 16},
		{`input:
  from: '${ . + {pad: ("x" * 3000)} }'
do:
  - noop:
      set:
        ok: true
`, "/input/from", "over --max-state-bytes (2000 bytes)", 2000},
	} {
		d := newDriver(t, ctkHead+tc.doc)
		d.env.MaxStateBytes = tc.maxState
		d.run(`{}`)
		if f := d.last.Fault; f == nil || !strings.Contains(f.Detail, tc.want) || f.Instance != tc.at {
			t.Errorf("fault %+v, want at %s one containing %s", d.last.Fault, tc.at, tc.want)
		}
	}
}

func TestForkBranchErrorCancelsTheOthers(t *testing.T) {
	doc := ctkHead + `do:
  - guard:
      try:
        - both:
            fork:
              branches:
                - slow:
                    listen:
                      to:
                        one:
                          with:
                            type: never
                - failing:
                    raise:
                      error:
                        type: https://example.com/bad
                        status: 422
      catch:
        errors:
          with:
            status: 422
`
	d := newDriver(t, doc)
	d.run(`{"in":1}`)
	d.wantOutput(`{"in":1}`)
	if len(d.cancels) != 1 || d.cancels[0] != "sw-1" {
		t.Errorf("cancelled %v, want the listen item sw-1", d.cancels)
	}
	d = newDriver(t, strings.Replace(doc, "with:\n            status: 422", "with:\n            status: 500", 1))
	d.run(`{"in":1}`)
	d.wantFault(Error{Type: "https://example.com/bad", Status: 422, Instance: "/do/0/guard/try/0/both/fork/branches/1/failing"})
}

// A listen filter's subject may be an expression on the task's input: an
// order waits for the events of its own id, also again under until.
func TestListenSubjectExpression(t *testing.T) {
	d := newDriver(t, ctkHead+`do:
  - paid:
      listen:
        to:
          any:
            - with:
                type: payment
                subject: ${ "order-" + (.id | tostring) }
          until: length >= 2
`)
	d.events = []json.RawMessage{
		json.RawMessage(`{"id":"e1","type":"payment","subject":"order-7","data":1}`),
		json.RawMessage(`{"id":"e2","type":"payment","subject":"order-7","data":2}`),
	}
	d.run(`{"id":7}`)
	d.wantOutput(`[1,2]`)
	for _, it := range d.items {
		if it.Kind == ItemListen && (it.Event != "payment" || it.Key != "order-7") {
			t.Errorf("listen item %+v, want payment/order-7", it)
		}
	}

	d = newDriver(t, ctkHead+`do:
  - paid:
      listen:
        to:
          one:
            with:
              type: payment
              subject: ${ .id }
`)
	d.run(`{"id":7}`)
	d.wantFault(Error{Type: "https://serverlessworkflow.io/spec/1.0.0/errors/expression", Status: 400, Title: "Expression failed",
		Detail: "listen subject: the subject must be a string, not a number", Instance: "/do/0/paid"})
}

// A fault's cause carries its error, cut at maxCauseError characters: it is
// the only trace of an error a retry or a catch handled.
func TestCauseOfAFault(t *testing.T) {
	for _, tc := range []struct {
		e    Error
		want string
	}{
		{Error{Type: "https://example.com/t", Title: "Not Found", Detail: "no pet 7"}, "Not Found: no pet 7"},
		{Error{Type: "https://example.com/t", Detail: "no pet 7"}, "no pet 7"},
		{Error{Type: "https://example.com/t"}, "https://example.com/t"},
		{Error{Title: "T", Detail: strings.Repeat("é", 2000)}, "T: " + strings.Repeat("é", maxCauseError-4) + "…"},
	} {
		if got := causeOf(&tc.e); got != tc.want {
			t.Errorf("causeOf(%+v) = %q (%d runes), want %q", tc.e, got, len([]rune(got)), tc.want)
		}
	}
}
