package main

// A Go code workflow (steps, parallel steps, a sleep, an event wait and a
// child) survives SIGKILL of its worker and of `flowd serve` at any point,
// on both stores, with every entry recorded exactly once in its state.
//
// The server and the worker are processes of their own, SIGKILLed and
// started again: the server is `flowd serve` (this tree's, built), the
// worker this test binary run as TestCodeCrashWorkerProcess (under -race,
// the race detector watches the SDK too). Every step's function appends
// its side effect to a file shared by every worker process ("effect KEY
// OUTPUT" before it sleeps, "return KEY OUTPUT" just before it returns),
// so the test can tell how often each ran and what each run returned.

import (
	"bufio"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/client"
	"github.com/flowd/flowd/internal/pgtest"
	"github.com/flowd/flowd/internal/storeopen"
	"github.com/flowd/flowd/internal/testkit"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/worker"
	"github.com/flowd/flowd/workflow"
)

// The worker process's settings.
const (
	crashURLEnv     = "FLOWD_CODE_CRASH_URL"     // the server
	crashEffectsEnv = "FLOWD_CODE_CRASH_EFFECTS" // the side effects file
)

// The code workflows the worker serves, and the event the parent waits for.
const (
	crashWorkflow = "crash"
	crashChild    = "crash-child"
	crashEvent    = "crash-go"
)

// crashLease is the worker's lease on a run (and the server's --lease): a
// killed worker's run is taken over this long after its last heartbeat.
const crashLease = 2 * time.Second

// crashInput is the parent's input: how long it sleeps, how long each
// step takes after its side effect, and where its steps pause (until the
// worker is killed) in the first attempt of a run: "b:before" (before the
// side effect) or "b:after" (after it, before the checkpoint).
type crashInput struct {
	SleepMS int      `json:"sleep_ms"`
	StepMS  int      `json:"step_ms"`
	Pause   []string `json:"pause,omitempty"`
}

// crashOutput is what the parent completes with: every entry's result.
type crashOutput struct {
	A     string `json:"a"`
	B     string `json:"b"`
	P1    string `json:"p1"`
	P2    string `json:"p2"`
	Event string `json:"event"`
	Kid   string `json:"kid"`
	C     string `json:"c"`
}

// The entries of the parent's state, by kind, and of the child's.
var (
	crashEntries = map[string]string{"a": "step", "b": "step", "p1": "step", "p2": "step",
		"nap": "sleep", "go": "event", "kid": "child", "c": "step"}
	crashChildEntries = map[string]string{"double": "step"}
)

// TestCodeCrashWorkerProcess is the worker of the code crash tests, as a
// process of its own.
func TestCodeCrashWorkerProcess(t *testing.T) {
	if os.Getenv(crashURLEnv) == "" {
		t.Skip("a child process of TestCodeCrash")
	}
	// The parent holds our stdin: should it die without killing us, EOF
	// ends us. The timer is a last resort.
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(3)
	}()
	time.AfterFunc(5*time.Minute, func() { os.Exit(4) })
	os.Exit(crashWorkerMain())
}

// crashWorkerMain serves the two code workflows until killed.
func crashWorkerMain() int {
	f, err := os.OpenFile(os.Getenv(crashEffectsEnv), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash worker:", err)
		return 2
	}
	fx := &effectWriter{f: f}
	parent := worker.Func(func(wf *worker.WorkflowContext, in crashInput) (crashOutput, error) {
		fx.line("run", wf.WorkflowID(), strconv.Itoa(wf.Attempt()))
		var out crashOutput
		var err error
		if out.A, err = worker.Step(wf, "a", fx.step(wf, "a", in)); err != nil {
			return out, err
		}
		if out.B, err = worker.Step(wf, "b", fx.step(wf, "b", in)); err != nil {
			return out, err
		}
		f1 := worker.Go(wf, "p1", fx.step(wf, "p1", in))
		f2 := worker.Go(wf, "p2", fx.step(wf, "p2", in))
		if out.P1, err = f1.Get(); err != nil {
			return out, err
		}
		if out.P2, err = f2.Get(); err != nil {
			return out, err
		}
		if err := wf.Sleep("nap", time.Duration(in.SleepMS)*time.Millisecond); err != nil {
			return out, err
		}
		if out.Event, err = worker.WaitForEvent[string](wf, "go", crashEvent, worker.WithKey(wf.WorkflowID())); err != nil {
			return out, err
		}
		if out.Kid, err = worker.Child[string](wf, "kid", crashChild, crashInput{StepMS: in.StepMS}); err != nil {
			return out, err
		}
		out.C, err = worker.Step(wf, "c", fx.step(wf, "c", in))
		return out, err
	})
	child := worker.Func(func(wf *worker.WorkflowContext, in crashInput) (string, error) {
		return worker.Step(wf, "double", fx.step(wf, "double", in))
	})
	// Every kill of a worker or server holding a run may cost the run an
	// attempt (its lease expires): more than the default 3.
	retry := &worker.RetryPolicy{MaxAttempts: 20, InitialBackoff: 100 * time.Millisecond, MaxBackoff: time.Second}
	cfg := worker.Config{
		Client: client.New(os.Getenv(crashURLEnv)),
		Name:   "crash-worker-" + strconv.Itoa(os.Getpid()),
		Workflows: map[string]worker.Workflow{
			crashWorkflow: {Run: parent, Retry: retry},
			crashChild:    {Run: child, Retry: retry},
		},
		Concurrency: 8, Lease: crashLease, Wait: 2 * time.Second,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	for {
		// Run gives up at once when the server does not answer its first
		// calls (the definitions' put, the first poll: the server was
		// killed as the worker started): as a supervisor would, start it
		// again.
		err := worker.Run(context.Background(), cfg)
		fmt.Fprintln(os.Stderr, crashRunReturned, err)
		time.Sleep(100 * time.Millisecond)
	}
}

// crashRunReturned starts the worker process's line when worker.Run
// returned.
const crashRunReturned = "crash worker: Run returned"

// effectWriter records the steps' side effects, one line a write (an
// O_APPEND write of a line is atomic between the worker processes).
type effectWriter struct{ f *os.File }

func (w *effectWriter) line(what, key, value string) {
	if _, err := fmt.Fprintf(w.f, "%s %s %s\n", what, key, value); err != nil {
		panic(err)
	}
}

// step is the function of step name: its side effect, then maybe a pause
// (until the worker is killed; only in a run's first attempt, so that the
// run taken over after the kill goes on), then in.StepMS, then its output,
// which differs from run to run.
func (w *effectWriter) step(wf *worker.WorkflowContext, name string, in crashInput) func(context.Context) (string, error) {
	first := wf.Attempt() == 1
	return func(ctx context.Context) (string, error) {
		key := worker.IdempotencyKey(ctx)
		pause := func(at string) error {
			if !first || !slices.Contains(in.Pause, name+":"+at) {
				return nil
			}
			w.line("pause", key, at)
			<-ctx.Done()
			return ctx.Err()
		}
		if err := pause("before"); err != nil {
			return "", err
		}
		var b [4]byte
		_, _ = crand.Read(b[:])
		out := fmt.Sprintf("%s:%d:%s", name, os.Getpid(), hex.EncodeToString(b[:]))
		w.line("effect", key, out)
		if err := pause("after"); err != nil {
			return "", err
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(time.Duration(in.StepMS) * time.Millisecond):
		}
		w.line("return", key, out)
		return out, nil
	}
}

// crashProc is a child process of the test.
type crashProc struct {
	name   string
	cmd    *exec.Cmd
	out    *syncBuffer
	stdin  io.WriteCloser
	exited chan struct{}
}

// gone reports whether the process has exited.
func (p *crashProc) gone() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// kill SIGKILLs the process (no deferred function, no release, no
// goodbye to the server) and waits for it.
func (p *crashProc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
	p.stdin.Close()
}

// crashHarness runs one store's server and worker processes.
type crashHarness struct {
	t       *testing.T // the test or subtest running now
	flowd   string     // the flowd binary
	db      string
	effects string
	addr    string // the server's address once it listened: restarts use it again
	c       *client.Client
	server  *crashProc
	worker  *crashProc
	// serverUp is when the server last started listening.
	serverUp time.Time

	mu    sync.Mutex
	procs []*crashProc
	// notes are what the test did, shown when it fails.
	notes syncBuffer
}

func newCrashHarness(t *testing.T, flowd, db string) *crashHarness {
	h := &crashHarness{t: t, flowd: flowd, db: db, effects: filepath.Join(t.TempDir(), "effects"), addr: "127.0.0.1:0"}
	t.Cleanup(func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, p := range h.procs {
			p.kill()
			if strings.Contains(p.out.String(), "DATA RACE") {
				t.Errorf("%s reported a data race:\n%s", p.name, p.out.String())
			}
		}
		if t.Failed() {
			t.Logf("notes:\n%s", h.notes.String())
			for _, p := range h.procs {
				t.Logf("output of %s:\n%s", p.name, p.out.String())
			}
		}
	})
	return h
}

// start starts cmd as a child process called name.
func (h *crashHarness) start(name string, cmd *exec.Cmd) *crashProc {
	h.t.Helper()
	p := &crashProc{name: name, cmd: cmd, out: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		h.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	h.mu.Lock()
	h.procs = append(h.procs, p)
	h.mu.Unlock()
	return p
}

// startServer starts `flowd serve` on the store (on the address of the
// first start) and waits until it listens.
func (h *crashHarness) startServer() {
	h.t.Helper()
	cmd := exec.Command(h.flowd, "serve", "--db", h.db, "--addr", h.addr, "--lease", crashLease.String(),
		"--sweep-interval", "100ms", "--workers", "4", "--log-level", "warn", "--db-wait", "20s")
	cmd.Env = slices.DeleteFunc(os.Environ(), func(v string) bool { return strings.HasPrefix(v, "FLOWD_") })
	p := h.start(fmt.Sprintf("serve#%d", len(h.procs)), cmd)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := urlLine.FindStringSubmatch(p.out.String()); m != nil {
			h.server, h.serverUp = p, time.Now()
			if h.c == nil {
				h.addr = strings.TrimPrefix(m[1], "http://")
				h.c = client.New(m[1])
			}
			return
		}
		select {
		case <-p.exited:
			h.t.Fatalf("flowd serve exited before listening: %s\n%s", p.cmd.ProcessState, p.out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("flowd serve did not listen within 30s:\n%s", p.out.String())
		}
	}
}

// startWorker starts the worker and waits until it polls.
func (h *crashHarness) startWorker() {
	h.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCodeCrashWorkerProcess$", "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), crashURLEnv+"=http://"+h.addr, crashEffectsEnv+"="+h.effects)
	p := h.start(fmt.Sprintf("worker#%d", len(h.procs)), cmd)
	h.worker = p
	name := "crash-worker-" + strconv.Itoa(cmd.Process.Pid)
	h.waitFor(30*time.Second, name+" to poll", func() bool {
		select {
		case <-p.exited:
			h.t.Fatalf("the worker exited: %s\n%s", p.cmd.ProcessState, p.out.String())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		workers, err := h.c.ListWorkers(ctx)
		return err == nil && slices.ContainsFunc(workers, func(w api.Worker) bool { return w.Worker == name })
	})
}

// waitFor polls cond every 20ms until it holds, failing the test after
// timeout.
func (h *crashHarness) waitFor(timeout time.Duration, what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("waited %s for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// get reads a workflow; nil while the server does not answer.
func (h *crashHarness) get(id string) *workflow.Instance {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	inst, err := h.c.GetWorkflow(ctx, id)
	if err != nil {
		return nil
	}
	return inst
}

// startWorkflow starts the parent id with in.
func (h *crashHarness) startWorkflow(id string, in crashInput) {
	h.t.Helper()
	raw, _ := json.Marshal(in)
	if _, err := h.c.CreateWorkflow(context.Background(), api.CreateWorkflowRequest{ID: id, Definition: crashWorkflow, Input: raw}); err != nil {
		h.t.Fatal(err)
	}
}

// publish publishes id's event, retrying while the server does not answer.
func (h *crashHarness) publish(id string) {
	h.t.Helper()
	data, _ := json.Marshal(eventData(id))
	h.waitFor(30*time.Second, "the event of "+id+" to be published", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := h.c.PublishEvent(ctx, crashEvent, id, data)
		return err == nil
	})
}

func eventData(id string) string { return "event of " + id }

// entryIs reports whether id's entry name has status.
func (h *crashHarness) entryIs(id, name string, status workflow.StepStatus) bool {
	inst := h.get(id)
	return inst != nil && inst.State.Steps[name] != nil && inst.State.Steps[name].Status == status
}

// waitCompleted waits until every workflow of ids has stopped; if they
// do not, it fails the test with what those left running wait for.
func (h *crashHarness) waitCompleted(timeout time.Duration, ids ...string) {
	h.t.Helper()
	running := func(inst *workflow.Instance) bool {
		return inst == nil || inst.Status == workflow.StatusRunning || inst.Status == workflow.StatusPending
	}
	deadline := time.Now().Add(timeout)
	for {
		left := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return !running(h.get(id)) })
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("after %s, %d workflows still run:\n%s", timeout, len(left), h.describe(left))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// describe tells the state and the task rows of the workflows ids and
// their children, read from the store.
func (h *crashHarness) describe(ids []string) string {
	ctx := context.Background()
	st, err := storeopen.Open(ctx, h.db, storeopen.Options{})
	if err != nil {
		return "opening the store: " + err.Error()
	}
	defer st.Close()
	var b strings.Builder
	for len(ids) > 0 {
		id := ids[0]
		ids = ids[1:]
		inst, err := st.Get(ctx, id)
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", id, err)
			continue
		}
		state, _ := json.Marshal(inst.State)
		fmt.Fprintf(&b, "%s %s v%d: %s\n", id, inst.Status, inst.Version, state)
		tasks, _ := st.TasksOfInstance(ctx, id)
		for _, t := range tasks {
			fmt.Fprintf(&b, "  task %s/%d %s %s attempt %d/%d run_at %s lease_until %s owner %q error %q\n", t.StepID, t.Iteration, t.Queue,
				t.Status, t.Attempt, t.MaxAttempts, t.RunAt.Format(time.StampMilli), t.LeaseUntil.Format(time.StampMilli), t.LeaseOwner, t.LastError)
		}
		if kid := inst.State.Steps["kid"].Child(); kid != "" {
			ids = append(ids, kid)
		}
	}
	return b.String()
}

// stepRuns are what the effects file says of one step: the outputs of
// its side effects and of its returns, in order, and where it paused; of
// a workflow, the attempts of its function's runs.
type stepRuns struct {
	effects, returns, pauses, runs []string
}

// runs reads the effects file, by idempotency key (WORKFLOW_ID/STEP) and
// workflow id.
func (h *crashHarness) runs() map[string]*stepRuns {
	h.t.Helper()
	f, err := os.Open(h.effects)
	if os.IsNotExist(err) {
		return map[string]*stepRuns{}
	}
	if err != nil {
		h.t.Fatal(err)
	}
	defer f.Close()
	out := map[string]*stepRuns{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 {
			h.t.Fatalf("effects file: bad line %q", sc.Text())
		}
		r := out[fields[1]]
		if r == nil {
			r = &stepRuns{}
			out[fields[1]] = r
		}
		switch fields[0] {
		case "effect":
			r.effects = append(r.effects, fields[2])
		case "return":
			r.returns = append(r.returns, fields[2])
		case "pause":
			r.pauses = append(r.pauses, fields[2])
		case "run":
			r.runs = append(r.runs, fields[2])
		}
	}
	return out
}

// paused reports whether step key paused at at.
func (h *crashHarness) paused(key, at string) bool {
	r := h.runs()[key]
	return r != nil && slices.Contains(r.pauses, at)
}

// crashResult is what check found of one parent: how often each step's
// side effect happened (with the child's as "kid/double"), when its sleep
// was due and when it ended, how often its function ran and the highest
// attempt of a run.
type crashResult struct {
	effects         map[string]int
	napDue, napDone time.Time
	runs, attempt   int
}

// repeats is how many side effects happened more than once.
func (r crashResult) repeats() int {
	n := 0
	for _, c := range r.effects {
		n += max(c-1, 0)
	}
	return n
}

// check asserts everything a parent must satisfy whatever was killed when:
// COMPLETED with the output its entries give; every entry recorded once
// (one seq each, 1..8; one checkpoint write of each step in the history;
// no entry changed once completed); versions contiguous; each step's
// recorded output one its function returned on some run; the event's
// data; one child, which satisfies the same.
func (h *crashHarness) check(id string) crashResult {
	h.t.Helper()
	t := h.t
	inst := h.get(id)
	if inst == nil {
		t.Fatalf("%s: cannot read it", id)
	}
	if inst.Status != workflow.StatusCompleted {
		state, _ := json.Marshal(inst.State)
		t.Fatalf("%s is %s, want COMPLETED; state %s", id, inst.Status, state)
	}
	runs := h.runs()
	res := crashResult{effects: map[string]int{}}
	if r := runs[id]; r != nil {
		res.runs = len(r.runs)
		for _, a := range r.runs {
			n, _ := strconv.Atoi(a)
			res.attempt = max(res.attempt, n)
		}
	}
	outputs := h.checkEntries(inst, crashEntries, runs, res.effects)
	var out crashOutput
	if err := json.Unmarshal(inst.Output, &out); err != nil {
		t.Fatalf("%s: output %s: %v", id, inst.Output, err)
	}
	want := crashOutput{A: outputs["a"], B: outputs["b"], P1: outputs["p1"], P2: outputs["p2"],
		Event: outputs["go"], Kid: outputs["kid"], C: outputs["c"]}
	if out != want {
		t.Errorf("%s: output %+v, want the recorded entries' %+v", id, out, want)
	}
	if out.Event != eventData(id) {
		t.Errorf("%s: event data %q, want %q", id, out.Event, eventData(id))
	}

	// One child, completed with the output the parent recorded.
	kids, err := h.c.ListWorkflows(context.Background(), client.ListOptions{Parent: id})
	if err != nil {
		t.Fatal(err)
	}
	if len(kids.Workflows) != 1 {
		t.Fatalf("%s has %d children, want 1", id, len(kids.Workflows))
	}
	kid := kids.Workflows[0]
	if kid.Status != workflow.StatusCompleted {
		t.Fatalf("%s's child %s is %s", id, kid.ID, kid.Status)
	}
	kidEffects := map[string]int{}
	kidOutputs := h.checkEntries(kid, crashChildEntries, runs, kidEffects)
	res.effects["kid/double"] = kidEffects["double"]
	var kidOut string
	if err := json.Unmarshal(kid.Output, &kidOut); err != nil || kidOut != kidOutputs["double"] || kidOut != out.Kid {
		t.Errorf("%s: child %s output %s, its step %q, the parent's entry %q", id, kid.ID, kid.Output, kidOutputs["double"], out.Kid)
	}

	// When the sleep was due, and the version that ended it.
	var until string
	_ = json.Unmarshal(inst.State.Steps["nap"].Extra["until"], &until)
	if res.napDue, err = time.Parse(time.RFC3339Nano, until); err != nil {
		t.Errorf("%s: nap until %q: %v", id, until, err)
	}
	h.history(inst, func(e store.HistoryEntry) {
		if st := e.State.Steps["nap"]; res.napDone.IsZero() && st != nil && st.Status == workflow.StepCompleted {
			res.napDone = e.At
		}
	})
	return res
}

// checkEntries checks inst's entries (want: kind by name) and its history,
// and returns the entries' outputs (decoded strings) by name; effects
// gets each step's side effect count.
func (h *crashHarness) checkEntries(inst *workflow.Instance, want map[string]string, runs map[string]*stepRuns, effects map[string]int) map[string]string {
	t := h.t
	t.Helper()
	outputs := map[string]string{}
	seqs := map[int]string{}
	for name, st := range inst.State.Steps {
		kind, ok := want[name]
		if !ok {
			t.Errorf("%s: unexpected entry %q (%s)", inst.ID, name, st.Status)
			continue
		}
		var gotKind string
		var seq int
		_ = json.Unmarshal(st.Extra["kind"], &gotKind)
		_ = json.Unmarshal(st.Extra["seq"], &seq)
		if gotKind != kind || st.Status != workflow.StepCompleted {
			t.Errorf("%s: entry %s is a %s %s, want a COMPLETED %s", inst.ID, name, gotKind, st.Status, kind)
		}
		if other, dup := seqs[seq]; dup {
			t.Errorf("%s: entries %s and %s have seq %d", inst.ID, name, other, seq)
		}
		seqs[seq] = name
		if kind == "sleep" {
			continue
		}
		var out string
		if err := json.Unmarshal(st.Output, &out); err != nil {
			t.Errorf("%s: entry %s output %s: %v", inst.ID, name, st.Output, err)
		}
		outputs[name] = out
		if kind != "step" {
			continue
		}
		r := runs[inst.ID+"/"+name]
		if r == nil {
			t.Errorf("%s: step %s is recorded (%q) and its function never ran", inst.ID, name, out)
			continue
		}
		effects[name] = len(r.effects)
		if !slices.Contains(r.returns, out) {
			t.Errorf("%s: step %s recorded %q; its function returned %v (side effects %v)", inst.ID, name, out, r.returns, r.effects)
		}
	}
	for name := range want {
		if inst.State.Steps[name] == nil {
			t.Errorf("%s: entry %s is not recorded", inst.ID, name)
		}
	}
	for i := 1; i <= len(want); i++ {
		if _, ok := seqs[i]; !ok {
			t.Errorf("%s: no entry has seq %d: %v", inst.ID, i, seqs)
		}
	}
	checkpoints := map[string]int{}
	h.history(inst, func(e store.HistoryEntry) {
		for name, kind := range want {
			if kind == "step" && e.Cause == fmt.Sprintf("step %q completed", name) {
				checkpoints[name]++
			}
		}
	})
	for name, kind := range want {
		if kind == "step" && checkpoints[name] != 1 {
			t.Errorf("%s: %d history versions record step %s, want 1", inst.ID, checkpoints[name], name)
		}
	}
	return outputs
}

// history reads inst's history, checks that its versions are exactly
// 0..inst.Version and that no entry changed once completed, and calls fn
// with each version.
func (h *crashHarness) history(inst *workflow.Instance, fn func(store.HistoryEntry)) {
	t := h.t
	t.Helper()
	hist, err := h.c.History(context.Background(), inst.ID)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(hist)) != inst.Version+1 {
		t.Errorf("%s: %d history versions for version %d", inst.ID, len(hist), inst.Version)
	}
	for i, e := range hist {
		if e.Version != int64(i) {
			t.Errorf("%s: history row %d has version %d", inst.ID, i, e.Version)
			break
		}
	}
	testkit.CheckStepsSettleOnce(t, inst.ID, hist)
	for _, e := range hist {
		fn(e)
	}
}

// TestCodeCrash runs, on each store, one `flowd serve` and one worker
// process through the kill scenarios in turn (each subtest starts its own
// workflows; the processes are shared, so that they start fewer times).
// It takes about 40s on two cores: some 30 process starts, and every
// killed worker's runs wait out their 2s lease.
func TestCodeCrash(t *testing.T) {
	stores := []struct {
		name string
		db   func(t *testing.T) string
	}{
		{"sqlite", func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "flowd.db") }},
		{"postgres", func(t *testing.T) string { return pgtest.NewDatabase(t) }},
	}
	flowd := buildFlowd(t)
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			h := newCrashHarness(t, flowd, st.db(t))
			h.startServer()
			h.startWorker()
			for _, sc := range []struct {
				name string
				run  func(h *crashHarness)
			}{
				{"KillWorker", crashKillWorker},
				{"KillDuringSleep", crashKillDuringSleep},
				{"KillServer", crashKillServer},
				{"KillAnything", crashKillAnything},
			} {
				t.Run(sc.name, func(t *testing.T) {
					h.t = t
					// A scenario that failed may have left a process down.
					if h.server == nil || h.server.gone() {
						h.startServer()
					}
					if h.worker == nil || h.worker.gone() {
						h.startWorker()
					}
					began := time.Now()
					sc.run(h)
					t.Logf("took %s", time.Since(began).Round(time.Millisecond))
				})
				h.t = t
			}
			h.mu.Lock()
			var gaveUp []string
			for _, p := range h.procs {
				for _, line := range strings.Split(p.out.String(), "\n") {
					if strings.HasPrefix(line, crashRunReturned) {
						gaveUp = append(gaveUp, line)
					}
				}
			}
			t.Logf("%d processes started; worker.Run gave up (and was started again) %d times %q", len(h.procs), len(gaveUp), gaveUp)
			h.mu.Unlock()
		})
	}
}

// crashKillWorker SIGKILLs the worker once while it holds three runs: one
// paused between step b's side effect and its checkpoint (scenario a),
// one paused just after step a's checkpoint, before b's side effect (b),
// one with both parallel steps paused after their side effects (f). Every
// event is published while the worker is down, before any wait began; one
// more workflow, started after the restart, gets its event after its wait
// began (d). After the restart all complete: b of the first runs again,
// p1 and p2 of the third run again, nothing of the second does.
func crashKillWorker(h *crashHarness) {
	t := h.t
	const afterEffect, afterCheckpoint, parallel, eventAfter = "after-effect", "after-checkpoint", "parallel", "event-after"
	h.startWorkflow(afterEffect, crashInput{SleepMS: 300, Pause: []string{"b:after"}})
	h.startWorkflow(afterCheckpoint, crashInput{SleepMS: 300, Pause: []string{"b:before"}})
	h.startWorkflow(parallel, crashInput{SleepMS: 300, Pause: []string{"p1:after", "p2:after"}})
	h.waitFor(30*time.Second, "the runs to pause", func() bool {
		return h.paused(afterEffect+"/b", "after") && h.paused(afterCheckpoint+"/b", "before") &&
			h.paused(parallel+"/p1", "after") && h.paused(parallel+"/p2", "after")
	})
	// The second run's a is recorded: it is killed right after that
	// checkpoint.
	if !h.entryIs(afterCheckpoint, "a", workflow.StepCompleted) {
		t.Fatalf("%s paused in b before a was recorded", afterCheckpoint)
	}
	h.worker.kill()
	killedAt := time.Now()
	for _, id := range []string{afterEffect, afterCheckpoint} {
		if inst := h.get(id); inst == nil || inst.State.Steps["b"] != nil {
			t.Fatalf("%s: b is recorded, or the workflow cannot be read, after the kill", id)
		}
	}
	for _, id := range []string{afterEffect, afterCheckpoint, parallel} {
		h.publish(id) // before its wait began
	}
	h.startWorker()
	h.startWorkflow(eventAfter, crashInput{SleepMS: 300})
	h.waitFor(30*time.Second, eventAfter+" to wait for its event", func() bool { return h.entryIs(eventAfter, "go", workflow.StepWaiting) })
	h.publish(eventAfter)
	h.waitCompleted(30*time.Second, afterEffect, afterCheckpoint, parallel, eventAfter)
	done := time.Since(killedAt)

	results := map[string]crashResult{}
	for _, id := range []string{afterEffect, afterCheckpoint, parallel, eventAfter} {
		results[id] = h.check(id)
	}
	runs := h.runs()
	want := map[string]map[string]int{
		afterEffect:     {"a": 1, "b": 2, "p1": 1, "p2": 1, "c": 1, "kid/double": 1},
		afterCheckpoint: {"a": 1, "b": 1, "p1": 1, "p2": 1, "c": 1, "kid/double": 1},
		parallel:        {"a": 1, "b": 1, "p1": 2, "p2": 2, "c": 1, "kid/double": 1},
		eventAfter:      {"a": 1, "b": 1, "p1": 1, "p2": 1, "c": 1, "kid/double": 1},
	}
	for id, counts := range want {
		for step, n := range counts {
			if got := results[id].effects[step]; got != n {
				t.Errorf("%s: step %s's side effect happened %d times, want %d", id, step, got, n)
			}
		}
	}
	// The killed runs' outputs were never returned: what is recorded is
	// the output of the run after the restart.
	for _, key := range []string{afterEffect + "/b", parallel + "/p1", parallel + "/p2"} {
		if r := runs[key]; len(r.returns) != 1 {
			t.Errorf("%s returned %v, want once (after the restart)", key, r.returns)
		}
	}
	total := 0
	for _, r := range results {
		total += r.repeats()
	}
	t.Logf("%d workflows completed %s after the worker was killed; %d side effects repeated",
		len(results), done.Round(time.Millisecond), total)
}

// crashKillDuringSleep SIGKILLs the worker (which holds no run then) and
// the server while two workflows sleep, publishes their events while the
// worker is down, and starts both again once the shorter sleep is due
// (scenario c): neither sleep's timer is lost, neither ends early, the
// longer ends when due and the shorter, due while the server was down, as
// soon as it is back (each within 2s).
func crashKillDuringSleep(h *crashHarness) {
	t := h.t
	sleeps := map[string]time.Duration{"sleeper-short": 600 * time.Millisecond, "sleeper-long": 2500 * time.Millisecond}
	for id, d := range sleeps {
		h.startWorkflow(id, crashInput{SleepMS: int(d / time.Millisecond)})
	}
	var due time.Time
	h.waitFor(30*time.Second, "both to sleep", func() bool {
		inst := h.get("sleeper-short")
		if inst == nil || inst.State.Steps["nap"] == nil || !h.entryIs("sleeper-long", "nap", workflow.StepWaiting) {
			return false
		}
		var until string
		_ = json.Unmarshal(inst.State.Steps["nap"].Extra["until"], &until)
		due, _ = time.Parse(time.RFC3339Nano, until)
		return true
	})
	h.worker.kill()
	h.server.kill()
	killedAt := time.Now()
	time.Sleep(time.Until(due) + 100*time.Millisecond)
	h.startServer()
	up := h.serverUp
	for id := range sleeps {
		h.publish(id) // before its wait began, the worker down
	}
	h.startWorker()
	h.waitCompleted(30*time.Second, "sleeper-short", "sleeper-long")
	for id := range sleeps {
		res := h.check(id)
		from := res.napDue
		if up.After(from) {
			from = up
		}
		if late := res.napDone.Sub(from); res.napDone.Before(res.napDue) || late > 2*time.Second {
			t.Errorf("%s: the sleep was due at %s, the server was back at %s, and the sleep ended at %s (%s after the later), want not before it was due and within 2s of the later",
				id, res.napDue.Format(time.StampMilli), up.Format(time.StampMilli), res.napDone.Format(time.StampMilli), late)
		}
		for step, n := range res.effects {
			if n != 1 {
				t.Errorf("%s: step %s's side effect happened %d times, want once", id, step, n)
			}
		}
		t.Logf("%s: the sleep ended %s after it was due", id, res.napDone.Sub(res.napDue).Round(time.Millisecond))
	}
	t.Logf("worker and server down for %s, past the shorter sleep's end", up.Sub(killedAt).Round(time.Millisecond))
}

// crashMany runs ten workflows (each step takes 100ms after its side
// effect, so kills land between effects and checkpoints too) while kill
// SIGKILLs something 3 to 5 times, 200-800ms apart, and starts it again.
// Half the events are published at the start, before their waits, the
// others once their waits began. All complete, every entry recorded
// once.
func crashMany(h *crashHarness, prefix string, kill func(rnd *rand.Rand) string) {
	t := h.t
	seed := uint64(time.Now().UnixNano())
	rnd := rand.New(rand.NewPCG(seed, seed>>1))
	ids := make([]string, 10)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%02d", prefix, i)
		h.startWorkflow(ids[i], crashInput{SleepMS: 300, StepMS: 100})
		if i%2 == 0 {
			h.publish(ids[i])
		}
	}
	// The others' events, once they wait, whatever is down meanwhile. A
	// publish whose answer was lost (the server killed) may have been
	// delivered: the wait's completion says so.
	stop := make(chan struct{})
	publisher := make(chan []string, 1)
	go func() {
		var late []string
		defer func() { publisher <- late }()
		for i := 1; i < len(ids); i += 2 {
			for {
				inst := h.get(ids[i])
				var wait *workflow.StepState
				if inst != nil {
					wait = inst.State.Steps["go"]
				}
				if wait != nil && wait.Status == workflow.StepCompleted {
					late = append(late, ids[i])
					break
				}
				if wait != nil && wait.Status == workflow.StepWaiting {
					data, _ := json.Marshal(eventData(ids[i]))
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					res, err := h.c.PublishEvent(ctx, crashEvent, ids[i], data)
					cancel()
					if err == nil {
						fmt.Fprintf(&h.notes, "%s published the event of %s: %+v\n", time.Now().Format(time.StampMilli), ids[i], *res)
						late = append(late, ids[i])
						break
					}
					fmt.Fprintf(&h.notes, "%s publishing the event of %s: %v\n", time.Now().Format(time.StampMilli), ids[i], err)
				}
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		}
	}()
	kills := 3 + rnd.IntN(3)
	var what []string
	for range kills {
		time.Sleep(time.Duration(200+rnd.IntN(601)) * time.Millisecond)
		what = append(what, kill(rnd))
	}
	h.waitCompleted(60*time.Second, ids...)
	close(stop)
	if late := <-publisher; len(late) != len(ids)/2 {
		t.Errorf("published the events of %v once they waited, want every other workflow's", late)
	}
	repeats, effects, runs, attempt := 0, 0, 0, 0
	for _, id := range ids {
		r := h.check(id)
		repeats += r.repeats()
		for _, n := range r.effects {
			effects += n
		}
		runs += r.runs
		attempt = max(attempt, r.attempt)
	}
	t.Logf("seed %d: %d kills %v; %d side effects, %d of them repeats; %d runs of the workflows' functions, the highest attempt of a run %d",
		seed, kills, what, effects, repeats, runs, attempt)
}

// crashKillServer: `flowd serve` SIGKILLed 3 to 5 times under ten
// workflows, started again at once on the same database (scenario e);
// the worker keeps retrying.
func crashKillServer(h *crashHarness) {
	crashMany(h, "server", func(*rand.Rand) string {
		h.server.kill()
		down := time.Now()
		h.startServer()
		return "server down " + time.Since(down).Round(time.Millisecond).String()
	})
}

// crashKillAnything: the worker, the server or both SIGKILLed 3 to 5
// times under ten workflows, at random, each started again at once.
func crashKillAnything(h *crashHarness) {
	crashMany(h, "any", func(rnd *rand.Rand) string {
		switch rnd.IntN(3) {
		case 0:
			h.worker.kill()
			h.startWorker()
			return "worker"
		case 1:
			h.server.kill()
			h.startServer()
			return "server"
		}
		h.worker.kill()
		h.server.kill()
		h.startServer()
		h.startWorker()
		return "both"
	})
}
