package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// Specs are canonical JSON (compact, keys sorted), as the engine passes them.
const (
	orderSpec1 = `{"name":"order","steps":[{"id":"a","type":"wait"}],"timeout":9007199254740993}`
	orderSpec2 = `{"name":"order","steps":[{"id":"a","type":"wait"},{"depends_on":["a"],"duration":"5s","id":"b","type":"sleep"}]}`
)

// defView is the comparable form of a definition record.
type defView struct {
	Name      string
	Revision  int
	Spec      any
	CreatedAt time.Time
}

func defViewOf(d *store.DefinitionRecord) *defView {
	if d == nil {
		return nil
	}
	return &defView{Name: d.Name, Revision: d.Revision, Spec: normJSON(d.Spec), CreatedAt: d.CreatedAt}
}

// assertDefinitions fails t unless got is want, in order, with normalised times.
func assertDefinitions(t testing.TB, what string, want, got []*store.DefinitionRecord) {
	t.Helper()
	wv, gv := make([]*defView, len(want)), make([]*defView, len(got))
	for i, d := range want {
		wv[i] = defViewOf(d)
	}
	for i, d := range got {
		gv[i] = defViewOf(d)
		if d != nil {
			checkTimeForm(t, fmt.Sprintf("%s[%d]: created_at", what, i), d.CreatedAt)
		}
	}
	if diff := cmp.Diff(wv, gv); diff != "" {
		t.Errorf("%s: definitions mismatch (-want +got):\n%s", what, diff)
	}
}

// putDefinition puts spec as name and fails t unless it returns rev, created.
func (b *bundle) putDefinition(t testing.TB, d store.DefinitionStore, name, spec string, rev int, created bool) *store.DefinitionRecord {
	t.Helper()
	gotRev, gotCreated, err := d.PutDefinition(b.ctx, name, json.RawMessage(spec))
	if err != nil {
		t.Fatalf("PutDefinition(%q, %s): %v", name, spec, err)
	}
	if gotRev != rev || gotCreated != created {
		t.Errorf("PutDefinition(%q, %s) = revision %d, created %v; want %d, %v", name, spec, gotRev, gotCreated, rev, created)
	}
	return &store.DefinitionRecord{Name: name, Revision: rev, Spec: json.RawMessage(spec), CreatedAt: store.Timestamp(b.clock.Now())}
}

func testDefinitionsPutAndGet(t *testing.T, h Harness) {
	b := setup(t, h)
	d := b.defs(t)
	b.clock.Advance(time.Second + 1)
	r1 := b.putDefinition(t, d, "order", orderSpec1, 1, true)
	b.clock.Advance(time.Second)
	// The same spec again is no new revision.
	b.putDefinition(t, d, "order", orderSpec1, 1, false)
	b.clock.Advance(time.Second)
	r2 := b.putDefinition(t, d, "order", orderSpec2, 2, true)
	b.clock.Advance(time.Second)
	// Compared with the latest revision only: the first spec comes back as 3.
	r3 := b.putDefinition(t, d, "order", orderSpec1, 3, true)
	b.clock.Advance(time.Second)
	b.putDefinition(t, d, "order", orderSpec1, 3, false)
	// Revisions count per name.
	billing := b.putDefinition(t, d, "billing", orderSpec2, 1, true)

	get := func(name string, rev int) *store.DefinitionRecord {
		t.Helper()
		rec, err := store.GetDefinition(b.ctx, d, name, rev)
		if err != nil {
			t.Fatalf("GetDefinition(%q, %d): %v", name, rev, err)
		}
		return rec
	}
	for _, c := range []struct {
		name string
		rev  int
		want *store.DefinitionRecord
	}{
		{"order", 0, r3}, {"order", 1, r1}, {"order", 2, r2}, {"order", 3, r3},
		{"billing", 0, billing}, {"billing", 1, billing},
	} {
		assertDefinitions(t, fmt.Sprintf("GetDefinition(%q, %d)", c.name, c.rev), []*store.DefinitionRecord{c.want}, []*store.DefinitionRecord{get(c.name, c.rev)})
	}
	for _, c := range []struct {
		name string
		rev  int
	}{
		{"order", 4}, {"order", 100}, {"missing", 0}, {"missing", 1}, {"ORDER", 0}, {"billing", 2},
	} {
		rec, err := store.GetDefinition(b.ctx, d, c.name, c.rev)
		wantErrorIs(t, fmt.Sprintf("GetDefinition(%q, %d)", c.name, c.rev), err, store.ErrNotFound)
		if rec != nil {
			t.Errorf("GetDefinition(%q, %d) returned %+v with an error", c.name, c.rev, rec)
		}
	}
}

func testDefinitionsInvalid(t *testing.T, h Harness) {
	b := setup(t, h)
	d := b.defs(t)
	for _, c := range []struct {
		name, spec string
	}{
		{"", orderSpec1},
		{"order", `{`},
		{"order", `{"a":}`},
		{"order", ``},
	} {
		var spec json.RawMessage
		if c.spec != "" {
			spec = json.RawMessage(c.spec)
		}
		_, _, err := d.PutDefinition(b.ctx, c.name, spec)
		wantErrorIs(t, fmt.Sprintf("PutDefinition(%q, %q)", c.name, c.spec), err, store.ErrInvalidArgument)
	}
	list, err := d.ListDefinitions(b.ctx, store.ListDefinitionsParams{})
	if err != nil || len(list) != 0 {
		t.Errorf("ListDefinitions after refused puts = %d definitions, %v; want none", len(list), err)
	}
	// The refusals did not use up a revision.
	b.putDefinition(t, d, "order", orderSpec1, 1, true)
}

func testDefinitionsList(t *testing.T, h Harness) {
	b := setup(t, h)
	d := b.defs(t)
	list, err := d.ListDefinitions(b.ctx, store.ListDefinitionsParams{})
	if err != nil || list == nil || len(list) != 0 {
		t.Errorf("ListDefinitions on an empty database = %#v, %v; want an empty, non-nil slice", list, err)
	}
	spec := func(name string, n int) string { return fmt.Sprintf(`{"name":%q,"n":%d}`, name, n) }
	b.putDefinition(t, d, "zeta", spec("zeta", 1), 1, true)
	b.clock.Advance(time.Second)
	alpha := b.putDefinition(t, d, "alpha", spec("alpha", 1), 1, true)
	b.clock.Advance(time.Second)
	b.putDefinition(t, d, "mid", spec("mid", 1), 1, true)
	b.putDefinition(t, d, "mid", spec("mid", 2), 2, true)
	b.clock.Advance(time.Second)
	zeta := b.putDefinition(t, d, "zeta", spec("zeta", 2), 2, true)
	b.clock.Advance(time.Second)
	mid := b.putDefinition(t, d, "mid", spec("mid", 3), 3, true)
	b.putDefinition(t, d, "mid", spec("mid", 3), 3, false)
	list, err = d.ListDefinitions(b.ctx, store.ListDefinitionsParams{})
	if err != nil {
		t.Fatalf("ListDefinitions: %v", err)
	}
	assertDefinitions(t, "ListDefinitions", []*store.DefinitionRecord{alpha, mid, zeta}, list)
	// One name: its latest revision, or the one asked for; nothing for a
	// name or revision that is not stored.
	for _, c := range []struct {
		p    store.ListDefinitionsParams
		want []*store.DefinitionRecord
	}{
		{store.ListDefinitionsParams{Name: "mid"}, []*store.DefinitionRecord{mid}},
		{store.ListDefinitionsParams{Name: "zeta", Revision: 2}, []*store.DefinitionRecord{zeta}},
		{store.ListDefinitionsParams{Name: "zeta", Revision: 3}, []*store.DefinitionRecord{}},
		{store.ListDefinitionsParams{Name: "missing"}, []*store.DefinitionRecord{}},
	} {
		got, err := d.ListDefinitions(b.ctx, c.p)
		if err != nil || got == nil {
			t.Errorf("ListDefinitions(%+v) = %#v, %v; want a non-nil slice", c.p, got, err)
			continue
		}
		assertDefinitions(t, fmt.Sprintf("ListDefinitions(%+v)", c.p), c.want, got)
	}
	_, err = d.ListDefinitions(b.ctx, store.ListDefinitionsParams{Revision: 1})
	wantErrorIs(t, "ListDefinitions of a revision without a name", err, store.ErrInvalidArgument)
}

func testDefinitionsConcurrentPut(t *testing.T, h Harness) {
	b := setup(t, h)
	d := b.defs(t)
	const rounds = 10
	specs := map[int]string{}
	for r := range rounds {
		var (
			revs    [2]int
			created [2]bool
			errs    [2]error
			mine    [2]string
		)
		runConcurrently(2, func(i int) {
			mine[i] = fmt.Sprintf(`{"name":"order","racer":%d,"round":%d}`, i, r)
			revs[i], created[i], errs[i] = d.PutDefinition(b.ctx, "order", json.RawMessage(mine[i]))
		})
		for i := range 2 {
			if errs[i] != nil {
				t.Fatalf("round %d: concurrent PutDefinition #%d: %v", r, i, errs[i])
			}
			if !created[i] {
				t.Errorf("round %d: PutDefinition #%d of a new spec returned created false", r, i)
			}
			specs[revs[i]] = mine[i]
		}
		if want := [2]int{2*r + 1, 2*r + 2}; revs != want && revs != [2]int{want[1], want[0]} {
			t.Errorf("round %d: revisions %v, want %v in some order", r, revs, want)
		}
	}
	// Two puts of the same new spec: one creates it, the other finds it.
	const same = `{"name":"order","same":true}`
	var (
		revs    [2]int
		created [2]bool
		errs    [2]error
	)
	runConcurrently(2, func(i int) {
		revs[i], created[i], errs[i] = d.PutDefinition(b.ctx, "order", json.RawMessage(same))
	})
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("concurrent PutDefinition of the same spec: %v, %v", errs[0], errs[1])
	}
	if revs != [2]int{2*rounds + 1, 2*rounds + 1} || created[0] == created[1] {
		t.Errorf("concurrent PutDefinition of the same spec = revisions %v, created %v; want both %d, created once", revs, created, 2*rounds+1)
	}
	specs[2*rounds+1] = same
	for rev, spec := range specs {
		rec, err := store.GetDefinition(b.ctx, d, "order", rev)
		if err != nil {
			t.Errorf("GetDefinition(order, %d): %v", rev, err)
			continue
		}
		assertJSON(t, fmt.Sprintf("spec of revision %d", rev), []byte(spec), rec.Spec)
	}
	if _, err := store.GetDefinition(b.ctx, d, "order", 2*rounds+2); err == nil {
		t.Errorf("revision %d exists; the puts created more revisions than specs", 2*rounds+2)
	}
	latest, err := store.GetDefinition(b.ctx, d, "order", 0)
	if err != nil || latest.Revision != 2*rounds+1 {
		t.Errorf("latest revision = %v, %v; want %d", latest, err, 2*rounds+1)
	}
}

func testCountByStatus(t *testing.T, h Harness) {
	b := setup(t, h)
	c := b.counter(t)
	got, err := countByStatus(b.ctx, c)
	if err != nil || len(got) != 0 {
		t.Errorf("CountInstances(ByStatus) on an empty database = %v, %v; want no entries", got, err)
	}
	want := map[workflow.Status]int64{}
	add := func(st workflow.Status, n int) {
		for range n {
			if st.Terminal() {
				b.terminalInstance(t, st)
			} else {
				b.create(t, store.CreateParams{Status: st})
			}
		}
		want[st] += int64(n)
	}
	add(workflow.StatusRunning, 3)
	add(workflow.StatusPending, 2)
	add(workflow.StatusPaused, 1)
	add(workflow.StatusCompleted, 2)
	add(workflow.StatusCancelled, 1)
	b.transition(t, b.create(t, store.CreateParams{Status: workflow.StatusRunning}).ID, workflow.StatusRunning, workflow.StatusTimedOut)
	want[workflow.StatusTimedOut]++
	got, err = countByStatus(b.ctx, c)
	if err != nil {
		t.Fatalf("CountInstances(ByStatus): %v", err)
	}
	if !maps.Equal(got, want) {
		t.Errorf("CountInstances(ByStatus) = %v, want %v (absent statuses absent)", got, want)
	}
}

// countByStatus is CountInstances asked for the counts by status only.
func countByStatus(ctx context.Context, c store.Counter) (map[workflow.Status]int64, error) {
	counts, err := c.CountInstances(ctx, store.CountParams{ByStatus: true})
	if err == nil && counts.Queued != nil { // asked for by status only
		err = fmt.Errorf("CountInstances(ByStatus) also counted the queued instances: %v", counts.Queued)
	}
	return counts.ByStatus, err
}

// The queued count is, per definition, the QUEUED instances with a
// concurrency key: neither another status nor a QUEUED instance without a
// key counts.
func testCountQueued(t *testing.T, h Harness) {
	b := setup(t, h)
	c := b.counter(t)
	got, err := c.CountInstances(b.ctx, store.CountParams{Queued: true})
	if err != nil || len(got.Queued) != 0 || got.ByStatus != nil {
		t.Errorf("CountInstances(Queued) on an empty database = %+v, %v; want no entries and no counts by status", got, err)
	}
	slot := &store.ConcurrencySlot{Key: "k", Limit: 1}
	b.create(t, store.CreateParams{Definition: "a", Status: workflow.StatusRunning, Concurrency: slot})
	for range 3 {
		b.create(t, store.CreateParams{Definition: "a", Status: workflow.StatusQueued, Concurrency: slot})
	}
	b.create(t, store.CreateParams{Definition: "b", Status: workflow.StatusQueued, Concurrency: slot})
	b.create(t, store.CreateParams{Definition: "c", Status: workflow.StatusQueued})
	got, err = c.CountInstances(b.ctx, store.CountParams{ByStatus: true, Queued: true})
	if err != nil {
		t.Fatalf("CountInstances: %v", err)
	}
	if want := map[string]int64{"a": 3, "b": 1}; !maps.Equal(got.Queued, want) {
		t.Errorf("CountInstances(Queued) = %v, want %v", got.Queued, want)
	}
	if want := map[workflow.Status]int64{workflow.StatusRunning: 1, workflow.StatusQueued: 5}; !maps.Equal(got.ByStatus, want) {
		t.Errorf("CountInstances(ByStatus, Queued).ByStatus = %v, want %v", got.ByStatus, want)
	}
}

// wakeups reads what a Listen channel delivers.
type wakeups struct {
	ch <-chan struct{}
}

// within waits up to d for a wake-up; false when none came (or the channel
// was closed).
func (w wakeups) within(d time.Duration) bool {
	select {
	case _, ok := <-w.ch:
		return ok
	case <-time.After(d):
		return false
	}
}

// drain consumes wake-ups until none arrives for quiet.
func (w wakeups) drain(quiet time.Duration) {
	for w.within(quiet) {
	}
}

func testListen(t *testing.T, h Harness) {
	b := setup(t, h)
	b.engine(t)
	l, ok := b.s.(store.Listener)
	if !ok {
		t.Skip("backend does not implement store.Listener")
	}
	other := h.Open(t, b.addr, nil)
	// Every write that asks to notify does: here a task row written alone,
	// unchanged.
	b.running(t, "n")
	b.insertTasks(t, withID("t-n", newTask("n", "a", "q1", clockStart)))
	notifyOn := func(q store.Querier) error {
		tk, err := q.Task(b.ctx, "t-n")
		if err != nil {
			return err
		}
		_, err = q.Apply(b.ctx, &store.Write{ID: "n", TasksOnly: true, Notify: true,
			Update: []store.TaskWrite{{Task: tk, Guard: store.GuardOf(tk)}}})
		return err
	}
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	ch, err := l.Listen(ctx)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	w := wakeups{ch}
	notify := func(what string) {
		t.Helper()
		if err := notifyOn(other); err != nil {
			t.Fatalf("%s: a notifying write on the other store: %v", what, err)
		}
	}

	// Listen may subscribe in the background: notify until the first wake-up.
	start := time.Now()
	for sent := 0; ; sent++ {
		notify("first")
		if w.within(100 * time.Millisecond) {
			t.Logf("first wake-up %v after Listen returned (%d notifies)", time.Since(start), sent+1)
			break
		}
		if time.Since(start) > 2*time.Second {
			t.Fatalf("no wake-up within 2s of Listen and %d notifies from another store", sent+1)
		}
	}
	w.drain(300 * time.Millisecond)

	// A Notify outside a transaction arrives.
	notify("outside a transaction")
	if !w.within(2 * time.Second) {
		t.Error("a Notify outside a transaction on another store did not arrive within 2s")
	}
	w.drain(300 * time.Millisecond)

	// Unread wake-ups coalesce and never block the listener.
	for range 5 {
		notify("burst")
	}
	time.Sleep(300 * time.Millisecond)
	w.drain(300 * time.Millisecond)
	notify("after a burst")
	if !w.within(2 * time.Second) {
		t.Error("after a burst of unread notifies, a new Notify did not arrive within 2s")
	}

	// Cancelling ctx closes the channel.
	cancel()
	deadline := time.After(2 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if ok {
				continue
			}
			return
		case <-deadline:
			t.Fatal("the Listen channel was not closed within 2s of cancelling its context")
		}
	}
}

// testEngineContextCancelled: every engine operation honours a cancelled
// context and changes nothing.
func testEngineContextCancelled(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	inst := b.running(t, "inst")
	b.insertTasks(t, withID("t-a", newTask(inst.ID, "a", "q1", clockStart)))
	task := b.lockTask(t, eq, "t-a")
	due := clockStart.Add(-time.Hour)
	b.create(t, store.CreateParams{ID: "due", Status: workflow.StatusRunning, Deadline: &due})
	b.create(t, store.CreateParams{ID: "pending"})
	b.insertTasks(t, withID("t-orphan", newTask("pending", "a", "q1", clockStart)))
	snaps := []snapshot{b.snapshot(t, "inst"), b.snapshot(t, "due")}
	ctx, cancel := context.WithCancel(b.ctx)
	cancel()
	dueCall := func(kind store.DueKind) func() error {
		return func() error {
			_, err := eq.Due(ctx, store.DueParams{Kind: kind, Now: clockStart, Limit: 10})
			return err
		}
	}
	calls := map[string]func() error{
		"Apply inserting": func() error {
			return InsertTasks(ctx, b.s, []*store.Task{withID("t-new", newTask(inst.ID, "new", "q1", clockStart))})
		},
		"Task": func() error { _, err := eq.Task(ctx, "t-a"); return err },
		"Apply of a task alone": func() error {
			c := *task
			c.Attempt = 5
			return UpdateTask(ctx, b.s, &c, clockStart)
		},
		"TasksOfInstance": func() error { _, err := eq.TasksOfInstance(ctx, inst.ID); return err },
		"ClaimTasks":      func() error { _, err := Claim(ctx, eq, []string{"q1"}, clockStart, 10); return err },
		"Due(timeouts)":   dueCall(store.DueTimeouts),
		"Due(leases)":     dueCall(store.DueLeases),
		"Due(abandoned)":  dueCall(store.DueAbandoned),
	}
	if d, ok := b.s.(store.DefinitionStore); ok {
		calls["PutDefinition"] = func() error { _, _, err := d.PutDefinition(ctx, "order", json.RawMessage(orderSpec1)); return err }
		calls["GetDefinition"] = func() error { _, err := store.GetDefinition(ctx, d, "order", 0); return err }
		calls["ListDefinitions"] = func() error { _, err := d.ListDefinitions(ctx, store.ListDefinitionsParams{}); return err }
	}
	if c, ok := b.s.(store.Counter); ok {
		calls["CountInstances"] = func() error {
			_, err := c.CountInstances(ctx, store.CountParams{ByStatus: true, Queued: true})
			return err
		}
	}
	for name, call := range calls {
		wantErrorIs(t, name+" with a cancelled context", call(), context.Canceled)
	}
	for _, s := range snaps {
		b.unchanged(t, "engine operations with a cancelled context", s)
	}
	assertTask(t, "task after operations with a cancelled context", task, b.lockTask(t, eq, "t-a"))
	_, err := eq.Task(b.ctx, "t-new")
	wantErrorIs(t, "Task of a task inserted with a cancelled context", err, store.ErrNotFound)
	if d, ok := b.s.(store.DefinitionStore); ok {
		_, err := store.GetDefinition(b.ctx, d, "order", 0)
		wantErrorIs(t, "GetDefinition of a definition put with a cancelled context", err, store.ErrNotFound)
	}
}
