package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/metrics"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// setTime moves c to t.
func (c *manualClock) setTime(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// schedNode is an engine that is not started (no scheduler loop, no
// workers): the tests run its scheduler's rounds themselves with
// FireSchedules, at the clock they set.
type schedNode struct {
	t   *testing.T
	st  store.Backend
	eng *engine.Engine
	m   *metrics.Metrics
}

const scheduledDef = `{"name": "job", "steps": [{"id": "a", "type": "task", "handler": "never-served"}]}`

func newSchedNode(t *testing.T, b backend, addr string, clock *manualClock) *schedNode {
	t.Helper()
	st := b.open(t, addr)
	t.Cleanup(func() { st.Close() })
	if _, err := st.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	m := metrics.New()
	workers := 0
	eng, err := engine.New(engine.Config{Store: st, Workers: &workers, Now: clock.Now, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := eng.PutDefinition(t.Context(), []byte(scheduledDef)); err != nil {
		t.Fatal(err)
	}
	return &schedNode{t: t, st: st, eng: eng, m: m}
}

func (n *schedNode) put(s store.Schedule) *store.Schedule {
	n.t.Helper()
	if s.Definition == "" {
		s.Definition = "job"
	}
	out, _, err := n.eng.PutSchedule(n.t.Context(), s)
	if err != nil {
		n.t.Fatalf("PutSchedule(%+v): %v", s, err)
	}
	return out
}

func (n *schedNode) fire() {
	n.t.Helper()
	if err := n.eng.FireSchedules(n.t.Context()); err != nil {
		n.t.Fatalf("FireSchedules: %v", err)
	}
}

// ids lists the ids of the instances of schedule name, oldest fire first.
func (n *schedNode) ids(name string) []string {
	n.t.Helper()
	page, err := n.st.List(n.t.Context(), store.ListParams{IDPrefix: name + "-", Limit: 1000})
	if err != nil {
		n.t.Fatal(err)
	}
	var ids []string
	for _, inst := range page.Instances {
		ids = append(ids, inst.ID)
	}
	slices.Sort(ids)
	return ids
}

func (n *schedNode) status(id string) workflow.Status {
	n.t.Helper()
	inst, err := n.st.Get(n.t.Context(), id)
	if err != nil {
		n.t.Fatal(err)
	}
	return inst.Status
}

func (n *schedNode) cancel(id string) {
	n.t.Helper()
	if _, err := n.eng.Action(n.t.Context(), id, "cancel"); err != nil {
		n.t.Fatal(err)
	}
}

func (n *schedNode) fires(name string) float64 {
	return labelledValue(n.m.ScheduleFires.WithLabelValues(name))
}

func (n *schedNode) misses(name string) float64 {
	return labelledValue(n.m.ScheduleMisses.WithLabelValues(name))
}

// labelledValue reads one counter of a vector.
func labelledValue(c interface{ Write(*dto.Metric) error }) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

var schedStart = time.Date(2026, 11, 25, 3, 59, 30, 0, time.UTC)

func TestScheduleFiresAtDueTime(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		clock := &manualClock{now: schedStart}
		n := newSchedNode(t, b, b.newDB(t), clock)
		n.put(store.Schedule{Name: "nightly", Cron: "0 4 * * *", Input: json.RawMessage(`{"k": "v"}`)})
		n.fire()
		if ids := n.ids("nightly"); len(ids) != 0 {
			t.Fatalf("fired before the fire time: %v", ids)
		}
		clock.setTime(time.Date(2026, 11, 25, 4, 0, 0, 0, time.UTC))
		n.fire()
		n.fire() // a second round at the same time starts nothing more
		want := []string{"nightly-20261125T040000Z"}
		if ids := n.ids("nightly"); !slices.Equal(ids, want) {
			t.Fatalf("instances = %v, want %v", ids, want)
		}
		inst, err := n.st.Get(t.Context(), want[0])
		if err != nil || inst.Status != workflow.StatusRunning || inst.Definition != "job" || string(inst.Input) != `{"k":"v"}` {
			t.Errorf("fired instance = %+v, %v", inst, err)
		}
		s, err := store.GetSchedule(t.Context(), n.st, "nightly")
		if err != nil || s.LastInstanceID != want[0] || !s.LastFireAt.Equal(clock.Now()) {
			t.Errorf("schedule after the fire = %+v, %v", s, err)
		}
		next, err := n.eng.NextFireTimes(s, 5)
		if err != nil || len(next) != 5 || !next[0].Equal(time.Date(2026, 11, 26, 4, 0, 0, 0, time.UTC)) {
			t.Errorf("NextFireTimes = %v, %v", next, err)
		}
		n.cancel(want[0]) // finished: overlap skip (the default) lets the next start
		clock.setTime(time.Date(2026, 11, 26, 4, 0, 10, 0, time.UTC))
		n.fire()
		if ids := n.ids("nightly"); len(ids) != 2 || ids[1] != "nightly-20261126T040000Z" {
			t.Errorf("second day: %v", ids)
		}
		if n.fires("nightly") != 2 || n.misses("nightly") != 0 {
			t.Errorf("fires %v misses %v, want 2 and 0", n.fires("nightly"), n.misses("nightly"))
		}
	})
}

// TestScheduleCatchupWindow: after a stop, the fire times younger than the
// catch-up window start; older ones are counted as misses.
func TestScheduleCatchupWindow(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		clock := &manualClock{now: time.Date(2026, 11, 25, 4, 0, 0, 500_000_000, time.UTC)}
		n := newSchedNode(t, b, b.newDB(t), clock)
		n.put(store.Schedule{Name: "min", Cron: "* * * * *", Overlap: store.OverlapAllow, CatchupWindow: 90 * time.Second})
		clock.Advance(10 * time.Minute) // 04:10:00.5: fire times 04:01 … 04:10 are due
		n.fire()
		want := []string{"min-20261125T040900Z", "min-20261125T041000Z"}
		if ids := n.ids("min"); !slices.Equal(ids, want) {
			t.Errorf("instances = %v, want %v", ids, want)
		}
		if n.fires("min") != 2 || n.misses("min") != 8 {
			t.Errorf("fires %v misses %v, want 2 and 8", n.fires("min"), n.misses("min"))
		}
	})
}

// TestScheduleDefaultCatchupWindow: with the default window (1m), a fire
// time found 5 minutes late is missed.
func TestScheduleDefaultCatchupWindow(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		clock := &manualClock{now: schedStart}
		n := newSchedNode(t, b, b.newDB(t), clock)
		n.put(store.Schedule{Name: "late", Cron: "0 4 * * *"})
		clock.setTime(time.Date(2026, 11, 25, 4, 5, 0, 0, time.UTC))
		n.fire()
		if ids := n.ids("late"); len(ids) != 0 || n.misses("late") != 1 {
			t.Errorf("instances %v, misses %v; want none and 1", ids, n.misses("late"))
		}
	})
}

func TestScheduleOverlap(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		clock := &manualClock{now: schedStart}
		n := newSchedNode(t, b, b.newDB(t), clock)
		at := func(min int) time.Time { return time.Date(2026, 11, 25, 4, min, 0, 0, time.UTC) }
		id := func(name string, min int) string { return store.ScheduleInstanceID(name, at(min)) }
		for _, o := range store.OverlapPolicies {
			n.put(store.Schedule{Name: o, Cron: "* * * * *", Overlap: o})
		}
		clock.setTime(at(0))
		n.fire() // every schedule starts its first instance, which never finishes by itself
		clock.setTime(at(1))
		n.fire()
		clock.setTime(at(2))
		n.fire()

		// skip: nothing while the first runs; the next fire after it ends starts.
		if ids := n.ids("skip"); !slices.Equal(ids, []string{id("skip", 0)}) || n.misses("skip") != 2 {
			t.Errorf("skip: %v, misses %v", ids, n.misses("skip"))
		}
		// allow: one per fire time.
		if ids := n.ids("allow"); !slices.Equal(ids, []string{id("allow", 0), id("allow", 1), id("allow", 2)}) {
			t.Errorf("allow: %v", ids)
		}
		// buffer_one: 04:01 waits, 04:02 is missed.
		if ids := n.ids("buffer_one"); !slices.Equal(ids, []string{id("buffer_one", 0)}) || n.misses("buffer_one") != 1 {
			t.Errorf("buffer_one: %v, misses %v", ids, n.misses("buffer_one"))
		}
		// cancel_other: each fire cancels the previous one.
		if ids := n.ids("cancel_other"); !slices.Equal(ids, []string{id("cancel_other", 0), id("cancel_other", 1), id("cancel_other", 2)}) {
			t.Errorf("cancel_other: %v", ids)
		}
		for _, m := range []int{0, 1} {
			if s := n.status(id("cancel_other", m)); s != workflow.StatusCancelled {
				t.Errorf("cancel_other %d: %s, want CANCELLED", m, s)
			}
		}
		if s := n.status(id("cancel_other", 2)); s != workflow.StatusRunning {
			t.Errorf("cancel_other latest: %s, want RUNNING", s)
		}

		// The previous instances finish; still at 04:02.
		n.cancel(id("skip", 0))
		n.cancel(id("buffer_one", 0))
		n.fire()
		if ids := n.ids("buffer_one"); !slices.Equal(ids, []string{id("buffer_one", 0), id("buffer_one", 1)}) {
			t.Errorf("buffer_one after the first finished: %v (the buffered 04:01 must start)", ids)
		}
		if s, _ := store.GetSchedule(t.Context(), n.st, "buffer_one"); s.BufferedFireAt != nil {
			t.Errorf("buffer_one still has a buffered fire: %v", s.BufferedFireAt)
		}
		clock.setTime(at(3))
		n.fire()
		if ids := n.ids("skip"); !slices.Equal(ids, []string{id("skip", 0), id("skip", 3)}) {
			t.Errorf("skip after the first finished: %v", ids)
		}
		// buffer_one: 04:01's instance runs, so 04:03 waits.
		if s, _ := store.GetSchedule(t.Context(), n.st, "buffer_one"); s.BufferedFireAt == nil || !s.BufferedFireAt.Equal(at(3)) {
			t.Errorf("buffer_one did not buffer 04:03: %+v", s)
		}
	})
}

// TestSchedulePauseResume: a paused schedule does not fire; resume does not
// replay the paused period beyond the catch-up window.
func TestSchedulePauseResume(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		clock := &manualClock{now: schedStart}
		n := newSchedNode(t, b, b.newDB(t), clock)
		n.put(store.Schedule{Name: "p", Cron: "* * * * *", Overlap: store.OverlapAllow})
		if _, err := n.st.SetSchedulePaused(t.Context(), "p", true); err != nil {
			t.Fatal(err)
		}
		clock.setTime(time.Date(2026, 11, 25, 4, 10, 30, 0, time.UTC))
		n.fire()
		if ids := n.ids("p"); len(ids) != 0 {
			t.Fatalf("a paused schedule fired: %v", ids)
		}
		if _, err := n.st.SetSchedulePaused(t.Context(), "p", false); err != nil {
			t.Fatal(err)
		}
		n.fire()
		// 04:10 is 30s old (inside the 1m window); 04:00 … 04:09 are not.
		if ids := n.ids("p"); !slices.Equal(ids, []string{"p-20261125T041000Z"}) || n.misses("p") != 10 {
			t.Errorf("after resume: %v, misses %v; want only 04:10 and 10 misses", ids, n.misses("p"))
		}
	})
}

func TestScheduleBackfill(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		clock := &manualClock{now: schedStart}
		n := newSchedNode(t, b, b.newDB(t), clock)
		n.put(store.Schedule{Name: "bf", Cron: "0 */6 * * *", Timezone: "Europe/Paris"})
		from := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC) // 01:00 in Paris
		to := time.Date(2026, 11, 21, 5, 0, 0, 0, time.UTC)   // 06:00 in Paris, included
		res, err := n.eng.BackfillSchedule(t.Context(), "bf", from, to)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"bf-20261120T050000Z", "bf-20261120T110000Z", "bf-20261120T170000Z", "bf-20261120T230000Z", "bf-20261121T050000Z"}
		if !slices.Equal(res.Created, want) || len(res.Existing) != 0 {
			t.Fatalf("first backfill = %+v, want created %v", res, want)
		}
		again, err := n.eng.BackfillSchedule(t.Context(), "bf", from, to)
		if err != nil || len(again.Created) != 0 || !slices.Equal(again.Existing, want) {
			t.Errorf("repeated backfill = %+v, %v; want nothing created", again, err)
		}
		if ids := n.ids("bf"); !slices.Equal(ids, want) {
			t.Errorf("instances = %v", ids)
		}
		// 1,001 fire times: refused, nothing started.
		n.put(store.Schedule{Name: "many", Cron: "* * * * *"})
		start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		if _, err := n.eng.BackfillSchedule(t.Context(), "many", start, start.Add(1000*time.Minute)); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("backfill of 1,001 fire times = %v, want ErrInvalidArgument", err)
		}
		if ids := n.ids("many"); len(ids) != 0 {
			t.Errorf("a refused backfill started %d instances", len(ids))
		}
		if res, err := n.eng.BackfillSchedule(t.Context(), "many", start, start.Add(999*time.Minute)); err != nil || len(res.Created) != 1000 {
			t.Errorf("backfill of 1,000 fire times: %d created, %v", len(res.Created), err)
		}
		if _, err := n.eng.BackfillSchedule(t.Context(), "bf", to, from); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("to before from = %v, want ErrInvalidArgument", err)
		}
		if _, err := n.eng.BackfillSchedule(t.Context(), "nope", from, to); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("unknown schedule = %v, want ErrNotFound", err)
		}
		// The scheduler reaching a backfilled fire time starts nothing new.
		n.put(store.Schedule{Name: "ahead", Cron: "0 4 * * *"})
		if _, err := n.eng.BackfillSchedule(t.Context(), "ahead", time.Date(2026, 11, 25, 4, 0, 0, 0, time.UTC), time.Date(2026, 11, 25, 4, 0, 0, 0, time.UTC)); err != nil {
			t.Fatal(err)
		}
		clock.setTime(time.Date(2026, 11, 25, 4, 0, 1, 0, time.UTC))
		n.fire()
		if ids := n.ids("ahead"); len(ids) != 1 || n.fires("ahead") != 0 {
			t.Errorf("scheduler after a backfill: %v, fires %v", ids, n.fires("ahead"))
		}
		if s, _ := store.GetSchedule(t.Context(), n.st, "ahead"); !s.FiredUntil.Equal(time.Date(2026, 11, 25, 4, 0, 0, 0, time.UTC)) {
			t.Errorf("the schedule did not advance past the backfilled fire: %v", s.FiredUntil)
		}
	})
}

// TestScheduleTrigger: a trigger starts one now, named after the current
// second; a second trigger in that second is refused (ErrExists).
func TestScheduleTrigger(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		clock := &manualClock{now: time.Date(2026, 11, 25, 4, 0, 0, 250_000_000, time.UTC)}
		n := newSchedNode(t, b, b.newDB(t), clock)
		n.put(store.Schedule{Name: "tr", Cron: "0 0 1 1 *", Paused: true})
		inst, err := n.eng.TriggerSchedule(t.Context(), "tr")
		if err != nil || inst.ID != "tr-20261125T040000Z" || inst.Status != workflow.StatusRunning {
			t.Fatalf("TriggerSchedule = %+v, %v", inst, err)
		}
		if _, err := n.eng.TriggerSchedule(t.Context(), "tr"); !errors.Is(err, store.ErrExists) {
			t.Errorf("second trigger in the same second = %v, want ErrExists", err)
		}
		clock.Advance(time.Second)
		if inst, err := n.eng.TriggerSchedule(t.Context(), "tr"); err != nil || inst.ID != "tr-20261125T040001Z" {
			t.Errorf("trigger a second later = %+v, %v", inst, err)
		}
		if _, err := n.eng.TriggerSchedule(t.Context(), "nope"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("unknown schedule = %v, want ErrNotFound", err)
		}
	})
}

func TestPutScheduleErrors(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		clock := &manualClock{now: schedStart}
		n := newSchedNode(t, b, b.newDB(t), clock)
		for _, tc := range []struct {
			s    store.Schedule
			want error
		}{
			{store.Schedule{Name: "x", Definition: "missing", Cron: "* * * * *"}, store.ErrNotFound},
			{store.Schedule{Name: "x", Definition: "job", Cron: "* * *"}, store.ErrInvalidArgument},
			{store.Schedule{Name: "x", Definition: "job", Cron: "* * * * *", Timezone: "Nowhere/Else"}, store.ErrInvalidArgument},
			{store.Schedule{Name: "x", Definition: "job", Cron: "@every 10ms"}, store.ErrInvalidArgument},
			{store.Schedule{Name: "x", Definition: "job", Cron: "* * * * *", Overlap: "queue"}, store.ErrInvalidArgument},
			{store.Schedule{Name: "bad/name", Definition: "job", Cron: "* * * * *"}, store.ErrInvalidArgument},
		} {
			if _, _, err := n.eng.PutSchedule(t.Context(), tc.s); !errors.Is(err, tc.want) {
				t.Errorf("PutSchedule(%+v) = %v, want %v", tc.s, err, tc.want)
			}
		}
	})
}

// TestScheduleDeletedDefinition: a fire whose definition was deleted is a
// miss, and the schedule moves on.
func TestScheduleDeletedDefinition(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		clock := &manualClock{now: schedStart}
		n := newSchedNode(t, b, b.newDB(t), clock)
		n.put(store.Schedule{Name: "orphan", Cron: "0 4 * * *"})
		if err := n.eng.DeleteDefinition(t.Context(), "job"); err != nil {
			t.Fatal(err)
		}
		clock.setTime(time.Date(2026, 11, 25, 4, 0, 0, 0, time.UTC))
		n.fire()
		s, err := store.GetSchedule(t.Context(), n.st, "orphan")
		if err != nil || !s.FiredUntil.Equal(clock.Now()) || n.misses("orphan") != 1 {
			t.Errorf("schedule %+v, %v, misses %v", s, err, n.misses("orphan"))
		}
	})
}

// TestScheduleCrashMidFire: a node created a fire's instance but died
// before the schedule advanced (simulated: the instance is written alone).
// The next node to fire treats the existing id as fired: no second
// instance, the schedule advances.
func TestScheduleCrashMidFire(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		clock := &manualClock{now: schedStart}
		addr := b.newDB(t)
		dying := newSchedNode(t, b, addr, clock)
		dying.put(store.Schedule{Name: "c", Cron: "0 4 * * *"})
		fireAt := time.Date(2026, 11, 25, 4, 0, 0, 0, time.UTC)
		clock.setTime(fireAt)
		id := store.ScheduleInstanceID("c", fireAt)
		// What the dying node managed to write: the instance, not the advance.
		if _, err := dying.eng.StartWorkflow(t.Context(), engine.StartParams{ID: id, Definition: "job"}); err != nil {
			t.Fatal(err)
		}
		other := newSchedNode(t, b, addr, clock)
		other.fire()
		other.fire()
		if ids := other.ids("c"); !slices.Equal(ids, []string{id}) {
			t.Errorf("instances = %v, want only %s", ids, id)
		}
		s, err := store.GetSchedule(t.Context(), other.st, "c")
		if err != nil || !s.FiredUntil.Equal(fireAt) || s.LastInstanceID != id {
			t.Errorf("schedule = %+v, %v", s, err)
		}
		if inst, err := other.st.Get(t.Context(), id); err != nil || inst.Version != 0 {
			t.Errorf("the existing instance was written again: %+v, %v", inst, err)
		}
	})
}

// TestScheduleTwoNodesExactlyOnce: two engines on one PostgreSQL database
// race through many fire times of several schedules; every fire time
// starts exactly one instance.
func TestScheduleTwoNodesExactlyOnce(t *testing.T) {
	b := postgresBackend(t)
	clock := &manualClock{now: schedStart}
	addr := b.newDB(t)
	nodes := []*schedNode{newSchedNode(t, b, addr, clock), newSchedNode(t, b, addr, clock)}
	names := []string{"s1", "s2", "s3"}
	for _, name := range names {
		nodes[0].put(store.Schedule{Name: name, Cron: "* * * * *", Overlap: store.OverlapAllow, CatchupWindow: 24 * time.Hour})
	}
	const minutes = 60
	ctx := context.Background()
	for step := range 6 {
		clock.setTime(schedStart.Add(time.Duration((step+1)*minutes/6) * time.Minute))
		var wg sync.WaitGroup
		for _, n := range nodes {
			for range 2 {
				wg.Go(func() {
					if err := n.eng.FireSchedules(ctx); err != nil {
						t.Error(err)
					}
				})
			}
		}
		wg.Wait()
	}
	for _, name := range names {
		ids := nodes[0].ids(name)
		if len(ids) != minutes {
			t.Errorf("%s: %d instances, want %d", name, len(ids), minutes)
		}
		for i, id := range ids {
			if want := store.ScheduleInstanceID(name, time.Date(2026, 11, 25, 4, i, 0, 0, time.UTC)); id != want {
				t.Errorf("%s: instance %d is %s, want %s", name, i, id, want)
				break
			}
		}
		if got := nodes[0].fires(name) + nodes[1].fires(name); got != minutes {
			t.Errorf("%s: the nodes counted %v fires, want %d", name, got, minutes)
		}
		for _, id := range ids {
			if h, err := nodes[0].st.History(ctx, id, 0, 0); err != nil || len(h) != 1 {
				t.Errorf("%s: %d history rows, %v; want one create", id, len(h), err)
			}
		}
	}
}

// TestSchedulerLoopFires: a started engine runs the scheduler on its own.
func TestSchedulerLoopFires(t *testing.T) {
	b := backends[0]
	clock := &manualClock{now: schedStart}
	st := b.open(t, b.newDB(t))
	t.Cleanup(func() { st.Close() })
	if _, err := st.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	workers := 0
	eng, err := engine.New(engine.Config{Store: st, Workers: &workers, Now: clock.Now, ScheduleInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := eng.PutDefinition(t.Context(), []byte(scheduledDef)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := eng.PutSchedule(t.Context(), store.Schedule{Name: "loop", Definition: "job", Cron: "0 4 * * *"}); err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eng.Stop)
	clock.setTime(time.Date(2026, 11, 25, 4, 0, 0, 0, time.UTC))
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := st.Get(t.Context(), "loop-20261125T040000Z"); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the scheduler loop did not fire within 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
