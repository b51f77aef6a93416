package storetest

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

var scheduleTests = []conformanceTest{
	{"Schedules_putGetListDelete", testSchedulesPutGetListDelete},
	{"Schedules_invalid", testSchedulesInvalid},
	{"Schedules_pause", testSchedulesPause},
	{"Schedules_fireGuard", testSchedulesFireGuard},
	{"Schedules_fireExistingInstance", testSchedulesFireExistingInstance},
	{"Schedules_fireCreateFails", testSchedulesFireCreateFails},
	{"Schedules_concurrentFires", testSchedulesConcurrentFires},
}

func newSchedule(name string) store.Schedule {
	return store.Schedule{Name: name, Definition: "d", Cron: "*/5 * * * *", FiredUntil: clockStart}
}

func (b *bundle) putSchedule(t testing.TB, s store.Schedule) (*store.Schedule, bool) {
	t.Helper()
	out, created, err := b.s.PutSchedule(b.ctx, s)
	if err != nil {
		t.Fatalf("PutSchedule(%+v): %v", s, err)
	}
	return out, created
}

func (b *bundle) getSchedule(t testing.TB, name string) *store.Schedule {
	t.Helper()
	s, err := store.GetSchedule(b.ctx, b.s, name)
	if err != nil {
		t.Fatalf("GetSchedule(%q): %v", name, err)
	}
	return s
}

// testSchedulesPutGetListDelete: a put fills the defaults and says whether it
// created; a replace changes the body fields but keeps where the firing
// stands; the list is by name in byte order; unknown names are ErrNotFound.
func testSchedulesPutGetListDelete(t *testing.T, h Harness) {
	b := setup(t, h)
	out, created := b.putSchedule(t, newSchedule("nightly"))
	if !created {
		t.Error("first PutSchedule: created = false")
	}
	if out.Overlap != store.OverlapSkip || out.CatchupWindow != store.DefaultCatchupWindow || string(out.Input) != `{}` ||
		out.Paused || out.LastFireAt != nil || out.BufferedFireAt != nil || out.LastInstanceID != "" {
		t.Errorf("defaults: %+v", out)
	}
	if !out.FiredUntil.Equal(store.Timestamp(clockStart)) || !out.CreatedAt.Equal(store.Timestamp(clockStart)) {
		t.Errorf("FiredUntil %v CreatedAt %v, want %v", out.FiredUntil, out.CreatedAt, store.Timestamp(clockStart))
	}

	// A fire moves FiredUntil; a replace must keep it.
	fire := clockStart.Add(time.Minute)
	if _, err := b.s.FireSchedule(b.ctx, store.ScheduleFire{Name: "nightly", FiredUntil: out.FiredUntil, NewFiredUntil: fire,
		Start: &store.CreateParams{ID: store.ScheduleInstanceID("nightly", fire)}, FireAt: fire}); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Hour)
	r := newSchedule("nightly")
	r.Cron, r.Timezone, r.Input, r.Overlap, r.Paused, r.CatchupWindow = "@daily", "Europe/Paris", json.RawMessage(` {"a": 1} `), store.OverlapAllow, true, time.Hour
	r.FiredUntil = clockStart.Add(10 * time.Hour) // ignored by a replace
	out, created = b.putSchedule(t, r)
	if created {
		t.Error("replace: created = true")
	}
	if out.Cron != "@daily" || out.Timezone != "Europe/Paris" || string(out.Input) != `{"a":1}` || out.Overlap != store.OverlapAllow ||
		!out.Paused || out.CatchupWindow != time.Hour {
		t.Errorf("replaced fields: %+v", out)
	}
	if !out.FiredUntil.Equal(store.Timestamp(fire)) || out.LastFireAt == nil || !out.LastFireAt.Equal(store.Timestamp(fire)) ||
		out.LastInstanceID != store.ScheduleInstanceID("nightly", fire) {
		t.Errorf("replace lost the firing state: %+v", out)
	}
	if !out.CreatedAt.Equal(store.Timestamp(clockStart)) || !out.UpdatedAt.Equal(store.Timestamp(clockStart.Add(time.Hour))) {
		t.Errorf("CreatedAt %v UpdatedAt %v", out.CreatedAt, out.UpdatedAt)
	}
	if got := b.getSchedule(t, "nightly"); got.Cron != "@daily" || !got.FiredUntil.Equal(out.FiredUntil) {
		t.Errorf("GetSchedule = %+v", got)
	}

	b.putSchedule(t, newSchedule("a"))
	b.putSchedule(t, newSchedule("B"))
	list, err := b.s.ListSchedules(b.ctx, store.ListSchedulesParams{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range list {
		names = append(names, s.Name)
	}
	if len(names) != 3 || names[0] != "B" || names[1] != "a" || names[2] != "nightly" {
		t.Errorf("ListSchedules names = %v, want [B a nightly]", names)
	}

	if err := b.s.DeleteSchedule(b.ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := store.GetSchedule(b.ctx, b.s, "a"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetSchedule after delete: %v, want ErrNotFound", err)
	}
	if one, err := b.s.ListSchedules(b.ctx, store.ListSchedulesParams{Name: "a"}); err != nil || one == nil || len(one) != 0 {
		t.Errorf("ListSchedules(Name a) after delete = %v, %v; want an empty, non-nil slice", one, err)
	}
	if one, err := b.s.ListSchedules(b.ctx, store.ListSchedulesParams{Name: "B"}); err != nil || len(one) != 1 || one[0].Name != "B" {
		t.Errorf("ListSchedules(Name B) = %v, %v; want B only", one, err)
	}
	if err := b.s.DeleteSchedule(b.ctx, "a"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("DeleteSchedule twice: %v, want ErrNotFound", err)
	}
	// The instances a schedule started are not its to delete.
	if err := b.s.DeleteSchedule(b.ctx, "nightly"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.s.Get(b.ctx, store.ScheduleInstanceID("nightly", fire)); err != nil {
		t.Errorf("instance after its schedule's delete: %v", err)
	}
}

func testSchedulesInvalid(t *testing.T, h Harness) {
	b := setup(t, h)
	long := make([]byte, store.MaxScheduleNameLength+1)
	for i := range long {
		long[i] = 'a'
	}
	for name, mutate := range map[string]func(*store.Schedule){
		"empty name":      func(s *store.Schedule) { s.Name = "" },
		"name with /":     func(s *store.Schedule) { s.Name = "a/b" },
		"name with colon": func(s *store.Schedule) { s.Name = "a:b" },
		"name too long":   func(s *store.Schedule) { s.Name = string(long) },
		"no definition":   func(s *store.Schedule) { s.Definition = "" },
		"no cron":         func(s *store.Schedule) { s.Cron = "" },
		"overlap":         func(s *store.Schedule) { s.Overlap = "sometimes" },
		"negative window": func(s *store.Schedule) { s.CatchupWindow = -time.Second },
		"input not JSON":  func(s *store.Schedule) { s.Input = json.RawMessage(`{`) },
	} {
		s := newSchedule("ok")
		mutate(&s)
		if _, _, err := b.s.PutSchedule(b.ctx, s); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("%s: PutSchedule = %v, want ErrInvalidArgument", name, err)
		}
	}
	if list, err := b.s.ListSchedules(b.ctx, store.ListSchedulesParams{}); err != nil || len(list) != 0 {
		t.Errorf("after invalid puts: %d schedules, %v", len(list), err)
	}
	if _, err := b.s.SetSchedulePaused(b.ctx, "nope", true); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("SetSchedulePaused(unknown) = %v, want ErrNotFound", err)
	}
	if _, err := b.s.FireSchedule(b.ctx, store.ScheduleFire{Name: "nope", FiredUntil: clockStart, NewFiredUntil: clockStart}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("FireSchedule(unknown) = %v, want ErrNotFound", err)
	}
}

// testSchedulesPause: a paused schedule does not fire, even with the guard
// its firing node read before the pause.
func testSchedulesPause(t *testing.T, h Harness) {
	b := setup(t, h)
	s, _ := b.putSchedule(t, newSchedule("p"))
	b.clock.Advance(time.Second)
	paused, err := b.s.SetSchedulePaused(b.ctx, "p", true)
	if err != nil || !paused.Paused || !paused.UpdatedAt.After(s.UpdatedAt) {
		t.Fatalf("SetSchedulePaused = %+v, %v", paused, err)
	}
	fire := clockStart.Add(time.Minute)
	_, err = b.s.FireSchedule(b.ctx, store.ScheduleFire{Name: "p", FiredUntil: s.FiredUntil, NewFiredUntil: fire,
		Start: &store.CreateParams{ID: store.ScheduleInstanceID("p", fire)}, FireAt: fire})
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("FireSchedule while paused = %v, want ErrConflict", err)
	}
	if _, err := b.s.Get(b.ctx, store.ScheduleInstanceID("p", fire)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a paused fire created its instance: %v", err)
	}
	resumed, err := b.s.SetSchedulePaused(b.ctx, "p", false)
	if err != nil || resumed.Paused {
		t.Fatalf("resume = %+v, %v", resumed, err)
	}
}

// testSchedulesFireGuard: a fire advances the schedule and creates its
// instance once; a fire with a stale guard writes nothing; the buffered fire
// time is part of the guard.
func testSchedulesFireGuard(t *testing.T, h Harness) {
	b := setup(t, h)
	s, _ := b.putSchedule(t, newSchedule("g"))
	f1 := clockStart.Add(time.Minute)
	id1 := store.ScheduleInstanceID("g", f1)
	inst, err := b.s.FireSchedule(b.ctx, store.ScheduleFire{Name: "g", FiredUntil: s.FiredUntil, NewFiredUntil: f1,
		Start: &store.CreateParams{ID: id1}, FireAt: f1})
	if err != nil || inst == nil || inst.ID != id1 {
		t.Fatalf("FireSchedule = %+v, %v", inst, err)
	}
	got := b.getSchedule(t, "g")
	if !got.FiredUntil.Equal(store.Timestamp(f1)) || got.LastInstanceID != id1 || !got.LastFireAt.Equal(store.Timestamp(f1)) {
		t.Errorf("after a fire: %+v", got)
	}
	// The same fire again, from a node that read before it: nothing.
	f2 := f1.Add(time.Minute)
	_, err = b.s.FireSchedule(b.ctx, store.ScheduleFire{Name: "g", FiredUntil: s.FiredUntil, NewFiredUntil: f2,
		Start: &store.CreateParams{ID: store.ScheduleInstanceID("g", f2)}, FireAt: f2})
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale FireSchedule = %v, want ErrConflict", err)
	}
	if _, err := b.s.Get(b.ctx, store.ScheduleInstanceID("g", f2)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a stale fire created its instance: %v", err)
	}
	// An advance with no start (a miss) that buffers a fire time.
	if inst, err := b.s.FireSchedule(b.ctx, store.ScheduleFire{Name: "g", FiredUntil: f1, NewFiredUntil: f2, NewBufferedFireAt: &f2}); err != nil || inst != nil {
		t.Fatalf("advance = %+v, %v", inst, err)
	}
	if got := b.getSchedule(t, "g"); got.BufferedFireAt == nil || !got.BufferedFireAt.Equal(store.Timestamp(f2)) || got.LastInstanceID != id1 {
		t.Errorf("after buffering: %+v", got)
	}
	// A guard without the buffered time misses.
	if _, err := b.s.FireSchedule(b.ctx, store.ScheduleFire{Name: "g", FiredUntil: f2, NewFiredUntil: f2}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("guard ignoring the buffered fire = %v, want ErrConflict", err)
	}
	id2 := store.ScheduleInstanceID("g", f2)
	if inst, err := b.s.FireSchedule(b.ctx, store.ScheduleFire{Name: "g", FiredUntil: f2, BufferedFireAt: &f2, NewFiredUntil: f2,
		Start: &store.CreateParams{ID: id2}, FireAt: f2}); err != nil || inst == nil || inst.ID != id2 {
		t.Fatalf("buffered fire = %+v, %v", inst, err)
	}
	if got := b.getSchedule(t, "g"); got.BufferedFireAt != nil || got.LastInstanceID != id2 {
		t.Errorf("after the buffered fire: %+v", got)
	}
}

// testSchedulesFireExistingInstance: a fire whose instance exists (its create
// landed but the schedule did not advance: a node died between two writes
// of an older flowd, or a backfill created it) advances and creates nothing.
func testSchedulesFireExistingInstance(t *testing.T, h Harness) {
	b := setup(t, h)
	s, _ := b.putSchedule(t, newSchedule("e"))
	f := clockStart.Add(time.Minute)
	id := store.ScheduleInstanceID("e", f)
	NewInstance(t, b.s, store.CreateParams{ID: id, Status: workflow.StatusRunning})
	inst, err := b.s.FireSchedule(b.ctx, store.ScheduleFire{Name: "e", FiredUntil: s.FiredUntil, NewFiredUntil: f,
		Start: &store.CreateParams{ID: id}, FireAt: f})
	if err != nil || inst != nil {
		t.Fatalf("FireSchedule of an existing instance = %+v, %v; want nil, nil", inst, err)
	}
	if got := b.getSchedule(t, "e"); !got.FiredUntil.Equal(store.Timestamp(f)) || got.LastInstanceID != id {
		t.Errorf("schedule did not advance: %+v", got)
	}
	if got, err := b.s.Get(b.ctx, id); err != nil || got.Status != workflow.StatusRunning || got.Version != 0 {
		t.Errorf("existing instance changed: %+v, %v", got, err)
	}
}

// testSchedulesFireCreateFails: a create that fails leaves the schedule
// where it was, so the fire is tried again.
func testSchedulesFireCreateFails(t *testing.T, h Harness) {
	b := setup(t, h)
	s, _ := b.putSchedule(t, newSchedule("c"))
	f := clockStart.Add(time.Minute)
	_, err := b.s.FireSchedule(b.ctx, store.ScheduleFire{Name: "c", FiredUntil: s.FiredUntil, NewFiredUntil: f,
		Start: &store.CreateParams{ID: "c-" + strings.Repeat("x", 200)}, FireAt: f})
	if !errors.Is(err, workflow.ErrInvalidID) {
		t.Fatalf("FireSchedule with an invalid id = %v, want workflow.ErrInvalidID", err)
	}
	if got := b.getSchedule(t, "c"); !got.FiredUntil.Equal(s.FiredUntil) || got.LastInstanceID != "" {
		t.Errorf("a failed fire advanced the schedule: %+v", got)
	}
}

// testSchedulesConcurrentFires: many writers firing the same fire time with
// the same guard: exactly one creates, the others conflict.
func testSchedulesConcurrentFires(t *testing.T, h Harness) {
	b := setup(t, h)
	s, _ := b.putSchedule(t, newSchedule("race"))
	f := clockStart.Add(time.Minute)
	id := store.ScheduleInstanceID("race", f)
	const n = 8
	var (
		wg              sync.WaitGroup
		mu              sync.Mutex
		created, misses int
	)
	for range n {
		wg.Go(func() {
			inst, err := b.s.FireSchedule(b.ctx, store.ScheduleFire{Name: "race", FiredUntil: s.FiredUntil, NewFiredUntil: f,
				Start: &store.CreateParams{ID: id}, FireAt: f})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && inst != nil:
				created++
			case errors.Is(err, store.ErrConflict):
				misses++
			default:
				t.Errorf("FireSchedule = %+v, %v", inst, err)
			}
		})
	}
	wg.Wait()
	if created != 1 || misses != n-1 {
		t.Errorf("created %d, conflicts %d; want 1 and %d", created, misses, n-1)
	}
	if h, err := b.s.History(b.ctx, id, 0, 0); err != nil || len(h) != 1 {
		t.Errorf("history of the fired instance: %d rows, %v", len(h), err)
	}
}
