package bench

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/internal/coderun"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/worker"
	"github.com/flowd/flowd/workflow"
)

// The code scenario's workflow: a code workflow of three steps that each
// add one to what the previous one returned (the input first), so that its
// output proves that all three ran, in order, once each: what DBOS's
// 3-step workflow in bench/peers does.
const codeChainName = "flowd-bench-code"

var codeChainSteps = [chainSteps]string{"a", "b", "c"}

// codeChain is the code scenario's function. Its last step's first run
// frees the workflow's in-flight slot, as the chain's last step does.
func (w *workflowScenario) codeChain(wf *worker.WorkflowContext, n int64) (int64, error) {
	v := n
	for _, name := range codeChainSteps {
		prev := v
		var err error
		if v, err = worker.Step(wf, name, func(context.Context) (int64, error) { return prev + 1, nil }); err != nil {
			return 0, err
		}
	}
	w.lastStepRan(wf.WorkflowID())
	return v, nil
}

// codeChainProblem says what is wrong with a COMPLETED workflow of the code
// scenario ("" when nothing): it must have recorded its three steps and
// nothing else, and output its input + 3.
func codeChainProblem(inst *workflow.Instance) string {
	if len(inst.State.Steps) != chainSteps {
		return fmt.Sprintf("%d entries recorded, want %d", len(inst.State.Steps), chainSteps)
	}
	for _, name := range codeChainSteps {
		if inst.State.Steps[name] == nil {
			return fmt.Sprintf("step %s is not recorded", name)
		}
	}
	n, err := strconv.ParseInt(string(inst.Input), 10, 64)
	if err != nil {
		return fmt.Sprintf("input %s is not the number it was started with", inst.Input)
	}
	if want := strconv.FormatInt(n+chainSteps, 10); string(inst.Output) != want {
		return fmt.Sprintf("output %s, want %s", inst.Output, want)
	}
	return ""
}

// newCodeEngine is the engine of a scenario that runs the code workflow
// name in process, as server.RegisterWorkflow does: on the run's store,
// with cfg.Workers in-process workers, warnings logged to the run's output,
// w's code definition stored and its runs recorded through the engine
// (coderun). It is not started.
func (r *runner) newCodeEngine(ctx context.Context, name string, w worker.Workflow) (*engine.Engine, error) {
	eng, err := r.baseEngine()
	if err != nil {
		return nil, err
	}
	def, err := w.Definition(name)
	if err != nil {
		return nil, err
	}
	if _, _, err := eng.PutDefinition(ctx, def); err != nil {
		return nil, fmt.Errorf("defining %s: %w", name, err)
	}
	eng.Register(name, worker.WorkflowHandler(w, coderun.Backend(eng)))
	return eng, nil
}

// The code-growth scenario's workflow.
const (
	codeGrowthName = "flowd-bench-code-growth"
	// CodeGrowthOutputSize is the bytes of random text each step of the
	// code-growth scenario outputs (a JSON string of that length).
	CodeGrowthOutputSize = 100
)

// codeGrowthScenario runs one code workflow of cfg.Steps steps, each a
// no-op returning CodeGrowthOutputSize bytes, in one run, then checks it
// and measures its history: the cost of a checkpoint as the journal
// grows. The run ends when the workflow has completed (or the context
// ends), whatever cfg.Duration says. Its steps' functions note when they
// are called: the mean time between two calls over the first and the last
// tenth of the steps is one checkpoint early and late in the workflow.
type codeGrowthScenario struct {
	r     *runner
	eng   *engine.Engine
	sizer store.HistorySizer
	id    string
	took  time.Duration // from the start to the completion seen
	ended time.Time     // when the completion was seen
	ran   chan struct{} // closed when the function has returned
	once  sync.Once

	mu    sync.Mutex
	calls []time.Time // calls[i]: the first call of step i's function
}

func (g *codeGrowthScenario) prepare(ctx context.Context) error {
	cfg := g.r.cfg
	sizer, ok := g.r.s.(store.HistorySizer)
	if !ok {
		return fmt.Errorf("%w: the %s store does not measure history", ErrInvalidConfig, g.r.s.Capabilities().Name)
	}
	g.sizer = sizer
	g.calls = make([]time.Time, cfg.Steps)
	g.ran = make(chan struct{})
	eng, err := g.r.newCodeEngine(ctx, codeGrowthName, worker.Workflow{Run: worker.Func(g.run)})
	if err != nil {
		return err
	}
	if err := eng.Start(ctx); err != nil {
		return err
	}
	g.eng = eng
	g.id = g.r.prefix + "g"
	return nil
}

// run is the workflow's function: cfg.Steps steps s00000, s00001, …; it
// returns how many it ran.
func (g *codeGrowthScenario) run(wf *worker.WorkflowContext, _ json.RawMessage) (int, error) {
	defer g.once.Do(func() { close(g.ran) })
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	raw := make([]byte, CodeGrowthOutputSize*3/4+3)
	for i := range g.calls {
		_, err := worker.Step(wf, fmt.Sprintf("s%05d", i), func(context.Context) (string, error) {
			g.mu.Lock()
			if g.calls[i].IsZero() {
				g.calls[i] = time.Now()
			}
			g.mu.Unlock()
			for j := range raw {
				raw[j] = byte(rng.Uint32())
			}
			// Encoded as a JSON string: 2 bytes of quotes.
			return base64.StdEncoding.EncodeToString(raw)[:CodeGrowthOutputSize-2], nil
		})
		if err != nil {
			return 0, err
		}
	}
	return len(g.calls), nil
}

// client 0 starts the workflow and waits for it to complete; the others
// have nothing to do. It is not read while the function runs: a read
// assembles every step recorded so far, and would load the node it
// measures; once the function has returned, the completion is a write
// away.
func (g *codeGrowthScenario) client(ctx context.Context, c *client) {
	if c.id == 0 {
		g.ended, g.took = g.r.runOne(ctx, g.eng, g.id, codeGrowthName, g.ran, time.Millisecond)
	}
}

// verify checks that the workflow completed with every step recorded once,
// in order, and that its history has a row per version, then measures the
// history and the checkpoints' pace.
func (g *codeGrowthScenario) verify(ctx context.Context, res *Result) error {
	g.eng.Stop()
	g.eng = nil
	steps := g.r.cfg.Steps
	res.Steps, res.OutputSize, res.Workers = steps, CodeGrowthOutputSize, g.r.cfg.Workers
	m := &mismatches{r: g.r}
	inst, err := g.r.s.Get(ctx, g.id)
	if err != nil {
		return err
	}
	if inst.Status != workflow.StatusCompleted {
		res.LostUpdates++
		m.report("workflow %s is %s at version %d", inst.ID, inst.Status, inst.Version)
		return nil
	}
	res.Ops = 1
	// The run lasted until the workflow completed, however long
	// --duration was.
	res.setTiming(g.ended.Sub(g.r.started), []time.Duration{g.took})
	if problem := codeGrowthProblem(inst, steps); problem != "" {
		res.LostUpdates++
		m.report("workflow %s: %s", inst.ID, problem)
	}
	size, err := g.sizer.HistorySize(ctx, g.id)
	if err != nil {
		return err
	}
	if size.Versions != inst.Version+1 {
		res.LostUpdates++
		m.report("workflow %s at version %d has %d history rows", inst.ID, inst.Version, size.Versions)
	}
	res.setHistory(size)
	res.CheckpointMSFirst, res.CheckpointMSLast = g.pace()
	g.r.logf("code-growth: %d steps; a checkpoint took %.3f ms over the first tenth, %.3f ms over the last; history: %d versions, %.0f bytes per version",
		steps, res.CheckpointMSFirst, res.CheckpointMSLast, size.Versions, res.HistoryBytesPerVersion)
	return nil
}

// codeGrowthProblem says what is wrong with the completed workflow ("" when
// nothing): steps entries, each a COMPLETED step with its output, their seq
// 1…steps in the order of their names, and the output the count.
func codeGrowthProblem(inst *workflow.Instance, steps int) string {
	if len(inst.State.Steps) != steps {
		return fmt.Sprintf("%d entries recorded, want %d", len(inst.State.Steps), steps)
	}
	for i := range steps {
		name := fmt.Sprintf("s%05d", i)
		st := inst.State.Steps[name]
		if st == nil || st.Status != workflow.StepCompleted || len(st.Output) != CodeGrowthOutputSize {
			return fmt.Sprintf("step %s is not recorded COMPLETED with its %d-byte output: %+v", name, CodeGrowthOutputSize, st)
		}
		if seq := string(st.Extra["seq"]); seq != strconv.Itoa(i+1) {
			return fmt.Sprintf("step %s has seq %s, want %d", name, seq, i+1)
		}
	}
	if want := strconv.Itoa(steps); string(inst.Output) != want {
		return fmt.Sprintf("output %s, want %s", inst.Output, want)
	}
	return ""
}

// pace is the mean time between two steps' first calls over the first and
// the last tenth of the steps (at least one interval each), in ms; zeros
// when there are fewer than two steps or a call was not noted.
func (g *codeGrowthScenario) pace() (first, last float64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := len(g.calls)
	if n < 2 {
		return 0, 0
	}
	for _, t := range g.calls {
		if t.IsZero() {
			return 0, 0
		}
	}
	k := max(1, (n-1)/10)
	mean := func(from int) float64 {
		return round3(float64(g.calls[from+k].Sub(g.calls[from])) / float64(time.Millisecond) / float64(k))
	}
	return mean(0), mean(n - 1 - k)
}

func (g *codeGrowthScenario) close() {
	if g.eng != nil {
		g.eng.Stop()
	}
}
