package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/worker"
	"github.com/flowd/flowd/workflow"
)

// The workflow scenario's definition: a chain of three task steps whose
// handler does nothing, so that what is measured is the engine and the store.
const (
	chainName   = "flowd-bench-chain"
	chainLast   = "c"
	noopHandler = "flowd-bench-noop"
	chainSteps  = 3
	chainDef    = `{"name": "` + chainName + `", "steps": [
  {"id": "a", "type": "task", "handler": "` + noopHandler + `"},
  {"id": "b", "type": "task", "handler": "` + noopHandler + `", "depends_on": ["a"]},
  {"id": "c", "type": "task", "handler": "` + noopHandler + `", "depends_on": ["b"]}
]}`
)

// limitedChainDef is the chain with a concurrency limit of limit per key,
// the key taken from the start's input.
func limitedChainDef(limit int) string {
	return strings.Replace(chainDef, `"steps": [`, fmt.Sprintf(`"concurrency": {"key": "{{ .input.k }}", "limit": %d}, "steps": [`, limit), 1)
}

// concurrencyKeys is how many keys the starts of a run with a concurrency
// limit take in turn: four times the workflows in flight at most (at least
// 64), so that a key's previous workflows have almost always finished when
// its turn comes again and the limit is rarely reached.
func concurrencyKeys(cfg Config) int64 {
	inflight := cfg.derived().MaxInFlight
	if inflight < 0 {
		inflight = 1024
	}
	return int64(max(64, 4*inflight))
}

// workflowScenario: an in-process engine with cfg.Workers workers runs the
// chain; clients start workflows as fast as cfg.MaxInFlight allows, or at
// cfg.Rate. Ops, latencies and losses come from the data: an op is a workflow
// whose COMPLETED version was written within the duration, its latency is
// updated_at − created_at of that version.
//
// With code set, it runs the code scenario instead: the same, with the
// chain a code workflow (codeChain) that the engine runs in process.
type workflowScenario struct {
	r       *runner
	code    bool
	eng     *engine.Engine
	seq     atomic.Int64
	started [][]string // per client
	nStart  atomic.Int64

	// slots bounds the workflows in flight (nil: no bound); a start takes a
	// slot, the first run of the last step gives it back.
	slots    chan struct{}
	lastDone sync.Map // workflow id → struct{}

	paceMu sync.Mutex
	next   time.Time // when the next start is due under cfg.Rate

	// keys is how many concurrency keys the starts are spread over (0:
	// the definition has no concurrency limit); queued counts the starts
	// that were QUEUED.
	keys   int64
	queued atomic.Int64
}

func (w *workflowScenario) prepare(ctx context.Context) error {
	cfg := w.r.cfg
	var eng *engine.Engine
	var err error
	if w.code {
		eng, err = w.r.newCodeEngine(ctx, codeChainName, worker.Workflow{Run: worker.Func(w.codeChain)})
	} else {
		def := chainDef
		if cfg.ConcurrencyLimit > 0 {
			def = limitedChainDef(cfg.ConcurrencyLimit)
			w.keys = concurrencyKeys(cfg)
		}
		eng, err = w.r.newEngine(ctx, noopHandler, w.handle, chainName, def)
	}
	if err != nil {
		return err
	}
	if cfg.MaxInFlight > 0 {
		w.slots = make(chan struct{}, cfg.MaxInFlight)
	}
	w.started = make([][]string, cfg.Clients)
	if err := eng.Start(ctx); err != nil {
		return err
	}
	w.eng = eng
	w.r.progress = func() string {
		return fmt.Sprintf("started=%d", w.nStart.Load())
	}
	return nil
}

// handle is the no-op handler. The first run of the last step of one of this
// run's workflows frees its in-flight slot and counts for the progress line
// (the final count comes from the data).
func (w *workflowScenario) handle(_ context.Context, t engine.Task) (json.RawMessage, error) {
	if t.Step == chainLast {
		w.lastStepRan(t.WorkflowID)
	}
	return json.RawMessage(`{}`), nil
}

// lastStepRan counts the first run of the last step of one of this run's
// workflows, and frees its in-flight slot.
func (w *workflowScenario) lastStepRan(id string) {
	if !strings.HasPrefix(id, w.r.prefix) {
		return
	}
	if _, again := w.lastDone.LoadOrStore(id, struct{}{}); !again {
		w.r.ops.Add(1)
		w.release()
	}
}

// release gives an in-flight slot back. It never blocks: a start that failed
// and gave its slot back may still have committed, and its last step then
// gives one back again.
func (w *workflowScenario) release() {
	select {
	case <-w.slots: // a nil channel is never ready
	default:
	}
}

func (w *workflowScenario) client(ctx context.Context, c *client) {
	for c.running() {
		if w.slots != nil {
			select {
			case w.slots <- struct{}{}:
			case <-w.r.stop:
				return
			}
		}
		if !w.pace() {
			w.release()
			return
		}
		n := w.seq.Add(1) - 1
		id := fmt.Sprintf("%sw%07d", w.r.prefix, n)
		p := engine.StartParams{ID: id, Definition: chainName}
		if w.code {
			p.Definition, p.Input = codeChainName, json.RawMessage(strconv.FormatInt(n, 10))
		}
		if w.keys > 0 {
			p.Input = json.RawMessage(fmt.Sprintf(`{"k": "%d"}`, n%w.keys))
		}
		inst, err := w.eng.StartWorkflow(ctx, p)
		if err != nil {
			w.release()
			w.r.classify("start", id, err)
			continue
		}
		if inst.Status == workflow.StatusQueued {
			w.queued.Add(1)
		}
		w.started[c.id] = append(w.started[c.id], id)
		w.nStart.Add(1)
	}
}

// pace waits until the next start is due under cfg.Rate; false when the run
// ended meanwhile. A start that is late does not make the next ones early.
func (w *workflowScenario) pace() bool {
	if w.r.cfg.Rate <= 0 {
		return true
	}
	interval := time.Duration(float64(time.Second) / w.r.cfg.Rate)
	w.paceMu.Lock()
	now := time.Now()
	at := w.next
	if at.Before(now) {
		at = now
	}
	w.next = at.Add(interval)
	w.paceMu.Unlock()
	t := time.NewTimer(time.Until(at))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-w.r.stop:
		return false
	}
}

// verify drains (waits up to cfg.Drain for the workflows in flight), stops the
// engine, then reads every started workflow: it must be COMPLETED with all
// its steps COMPLETED and a history of versions 0…current with no gap.
// lost_updates = started − completed, plus broken histories.
func (w *workflowScenario) verify(ctx context.Context, res *Result) error {
	t0 := time.Now()
	deadline := t0.Add(w.r.cfg.Drain)
	for w.r.ops.Load() < w.nStart.Load() && time.Now().Before(deadline) && w.r.ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	w.eng.Stop() // waits for the completions in progress to be recorded
	w.eng = nil
	res.DrainS = seconds(time.Since(t0))

	var ids []string
	for _, s := range w.started {
		ids = append(ids, s...)
	}
	lat := make([]time.Duration, len(ids))
	completed := make([]bool, len(ids))
	var inWindow, broken atomic.Int64
	windowEnd := w.r.stopped
	m := &mismatches{r: w.r}
	err := w.r.forEach(ctx, len(ids), func(i int) error {
		inst, err := w.r.s.Get(ctx, ids[i])
		if err != nil {
			return err
		}
		if inst.Status != workflow.StatusCompleted {
			m.report("workflow %s is %s at version %d after the drain", inst.ID, inst.Status, inst.Version)
			return nil
		}
		completed[i] = true
		lat[i] = inst.UpdatedAt.Sub(inst.CreatedAt)
		if !inst.UpdatedAt.After(windowEnd) {
			inWindow.Add(1)
		}
		for id, st := range inst.State.Steps {
			if st.Status != workflow.StepCompleted {
				broken.Add(1)
				m.report("workflow %s is COMPLETED with step %s %s", inst.ID, id, st.Status)
				return nil
			}
		}
		if w.code {
			if problem := codeChainProblem(inst); problem != "" {
				broken.Add(1)
				m.report("workflow %s: %s", inst.ID, problem)
				return nil
			}
		}
		h, err := w.r.s.History(ctx, inst.ID, 0, 0)
		if err != nil {
			return err
		}
		gap := int64(len(h)) != inst.Version+1
		for v, e := range h {
			gap = gap || e.Version != int64(v)
		}
		if gap || h[len(h)-1].Status != workflow.StatusCompleted {
			broken.Add(1)
			m.report("workflow %s at version %d has a history of %d rows that is not 0…%d ending COMPLETED", inst.ID, inst.Version, len(h), inst.Version)
		}
		return nil
	})
	if err != nil {
		return err
	}
	done := kept(lat, completed)
	window := w.r.stopped.Sub(w.r.started)
	res.Ops = inWindow.Load()
	res.setTiming(window, done)
	res.StepsPerSec = round3(float64(res.Ops*chainSteps) / window.Seconds())
	res.Workers = w.r.cfg.Workers
	res.ConcurrencyLimit = w.r.cfg.ConcurrencyLimit
	res.Queued = w.queued.Load()
	res.Started = int64(len(ids))
	res.Completed = int64(len(done))
	res.LostUpdates = res.Started - res.Completed + broken.Load()
	return nil
}

func (w *workflowScenario) close() {
	if w.eng != nil {
		w.eng.Stop()
	}
}

// baseEngine is a scenario's engine, not started: on the run's store, with
// cfg.Workers in-process workers, warnings logged to the run's output.
func (r *runner) baseEngine() (*engine.Engine, error) {
	log := slog.New(slog.DiscardHandler)
	if r.out != nil {
		log = slog.New(slog.NewTextHandler(r.out, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return engine.New(engine.Config{Store: r.s, Logger: log, Workers: &r.cfg.Workers})
}

// newEngine is the engine of a scenario that runs workflows: on the run's
// store, with cfg.Workers in-process workers serving handler under name,
// warnings logged to the run's output, and the definition def (named
// defName) stored. It is not started.
func (r *runner) newEngine(ctx context.Context, name string, handler engine.Handler, defName, def string) (*engine.Engine, error) {
	eng, err := r.baseEngine()
	if err != nil {
		return nil, err
	}
	eng.Register(name, handler)
	if _, _, err := eng.PutDefinition(ctx, []byte(def)); err != nil {
		return nil, fmt.Errorf("defining %s: %w", defName, err)
	}
	return eng, nil
}
