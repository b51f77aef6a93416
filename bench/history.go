package bench

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// The history scenario's definition: a chain of cfg.Steps task steps whose
// handler outputs cfg.OutputSize bytes of random base64 text, so that the
// state grows by about that much per step and compresses poorly.
const (
	historyDefName = "flowd-bench-history"
	historyHandler = "flowd-bench-output"
)

// historyScenario runs one workflow of the chain through an in-process
// engine, then measures its history from the database (store.HistorySizer):
// bytes written per version and history bytes / final state bytes. The run
// ends when the workflow has completed (or the context ends), whatever
// cfg.Duration says.
type historyScenario struct {
	r      *runner
	eng    *engine.Engine
	sizer  store.HistorySizer
	id     string
	took   time.Duration
	output func() json.RawMessage
}

func historyDefinition(steps int) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, `{"name": %q, "steps": [`, historyDefName)
	for i := range steps {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `{"id": "s%04d", "type": "task", "handler": %q`, i, historyHandler)
		if i > 0 {
			fmt.Fprintf(&sb, `, "depends_on": ["s%04d"]`, i-1)
		}
		sb.WriteString("}")
	}
	sb.WriteString("]}")
	return sb.String()
}

func (h *historyScenario) prepare(ctx context.Context) error {
	cfg := h.r.cfg
	sizer, ok := h.r.s.(store.HistorySizer)
	if !ok {
		return fmt.Errorf("%w: the %s store does not measure history", ErrInvalidConfig, h.r.s.Capabilities().Name)
	}
	h.sizer = sizer
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	h.output = func() json.RawMessage {
		raw := make([]byte, cfg.OutputSize*3/4+3)
		for i := range raw {
			raw[i] = byte(rng.Uint32())
		}
		return json.RawMessage(`"` + base64.StdEncoding.EncodeToString(raw)[:cfg.OutputSize] + `"`)
	}
	log := slog.New(slog.DiscardHandler)
	if h.r.out != nil {
		log = slog.New(slog.NewTextHandler(h.r.out, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	eng, err := engine.New(engine.Config{Store: h.r.s, Logger: log, Workers: &cfg.Workers})
	if err != nil {
		return err
	}
	eng.Register(historyHandler, func(context.Context, engine.Task) (json.RawMessage, error) { return h.output(), nil })
	if _, _, err := eng.PutDefinition(ctx, []byte(historyDefinition(cfg.Steps))); err != nil {
		return fmt.Errorf("defining %s: %w", historyDefName, err)
	}
	if err := eng.Start(ctx); err != nil {
		return err
	}
	h.eng = eng
	h.id = h.r.prefix + "h"
	return nil
}

// client 0 starts the workflow and waits for it to end; the others have
// nothing to do.
func (h *historyScenario) client(ctx context.Context, c *client) {
	if c.id == 0 {
		_, h.took = h.r.runOne(ctx, h.eng, h.id, historyDefName, nil, 20*time.Millisecond)
	}
}

// runOne starts workflow id of definition on eng and reads it every poll,
// once ready is closed (nil: at once), until it has ended; it returns
// when its end was seen and how long after the start (zeros when ctx
// ended first, or a start or a read failed: that is classified).
func (r *runner) runOne(ctx context.Context, eng *engine.Engine, id, definition string, ready <-chan struct{}, poll time.Duration) (ended time.Time, took time.Duration) {
	t0 := time.Now()
	if _, err := eng.StartWorkflow(ctx, engine.StartParams{ID: id, Definition: definition}); err != nil {
		r.classify("start", id, err)
		return time.Time{}, 0
	}
	if ready != nil {
		select {
		case <-ready:
		case <-ctx.Done():
		}
	}
	for ctx.Err() == nil {
		inst, err := r.s.Get(ctx, id)
		if err != nil {
			r.classify("get", id, err)
			return time.Time{}, 0
		}
		if inst.Status.Terminal() || inst.Status == workflow.StatusFailed {
			ended = time.Now()
			return ended, ended.Sub(t0)
		}
		time.Sleep(poll)
	}
	return time.Time{}, 0
}

// verify checks that the workflow completed and that its history reads
// back (versions 0…current, the last one the instance's state), then
// measures it.
func (h *historyScenario) verify(ctx context.Context, res *Result) error {
	h.eng.Stop()
	h.eng = nil
	m := &mismatches{r: h.r}
	inst, err := h.r.s.Get(ctx, h.id)
	if err != nil {
		return err
	}
	if inst.Status != workflow.StatusCompleted {
		res.LostUpdates++
		m.report("workflow %s is %s at version %d", inst.ID, inst.Status, inst.Version)
	} else {
		res.Ops = 1
		res.setTiming(h.r.stopped.Sub(h.r.started), []time.Duration{h.took})
	}
	hist, err := h.r.s.History(ctx, h.id, 0, 0)
	if err != nil {
		return err
	}
	want, err := inst.State.MarshalJSON()
	if err != nil {
		return err
	}
	ok := int64(len(hist)) == inst.Version+1
	for v, e := range hist {
		ok = ok && e.Version == int64(v)
	}
	if ok {
		got, err := hist[len(hist)-1].State.MarshalJSON()
		ok = err == nil && bytes.Equal(got, want)
	}
	if !ok {
		res.LostUpdates++
		m.report("workflow %s at version %d: its history of %d versions does not read back to its state", inst.ID, inst.Version, len(hist))
	}
	size, err := h.sizer.HistorySize(ctx, h.id)
	if err != nil {
		return err
	}
	res.Steps = h.r.cfg.Steps
	res.OutputSize = h.r.cfg.OutputSize
	res.setHistory(size)
	h.r.logf("history: %d versions (%d snapshots), %d bytes of history, %.0f per version; final state %d bytes: ratio %.3f",
		size.Versions, size.Snapshots, size.Bytes, res.HistoryBytesPerVersion, size.StateBytes, res.HistoryRatio)
	return nil
}

// setHistory fills in the measures of a workflow's history.
func (res *Result) setHistory(size store.HistorySize) {
	res.HistoryVersions = size.Versions
	res.HistorySnapshots = size.Snapshots
	res.HistoryBytes = size.Bytes
	res.FinalStateBytes = size.StateBytes
	if size.Versions > 0 {
		res.HistoryBytesPerVersion = round3(float64(size.Bytes) / float64(size.Versions))
	}
	if size.StateBytes > 0 {
		res.HistoryRatio = round3(float64(size.Bytes) / float64(size.StateBytes))
	}
}

func (h *historyScenario) close() {
	if h.eng != nil {
		h.eng.Stop()
	}
}
