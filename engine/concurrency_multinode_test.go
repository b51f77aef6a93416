package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// The definitions of the two-node test: a queue of limit 3 per key and a
// cancel_in_progress of limit 2, each holding their slot through a task
// that the in-process workers of both nodes run.
const (
	limitQueue = 3
	limitRoom  = 2
)

var twoNodeDefs = []string{
	fmt.Sprintf(`
name: lim
concurrency: {key: "{{ .input.k }}", limit: %d}
steps:
  - {id: work, type: task, handler: work}
  - {id: more, type: task, handler: work, depends_on: [work]}
`, limitQueue),
	fmt.Sprintf(`
name: room
concurrency: {key: "{{ .input.k }}", limit: %d, strategy: cancel_in_progress}
steps:
  - {id: work, type: task, handler: work}
`, limitRoom),
}

func limitOf(def string) int {
	if def == "room" {
		return limitRoom
	}
	return limitQueue
}

// work holds its slot for a moment: completions interleave with starts.
func work(ctx context.Context, _ engine.Task) (json.RawMessage, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(time.Duration(rand.IntN(3000)) * time.Microsecond):
	}
	return json.RawMessage(`{}`), nil
}

// TestConcurrencyLimitTwoNodes starts many instances of keys with a limit
// on two engines sharing one PostgreSQL database while their workers
// complete tasks, and checks that no key ever has more holders than its
// limit: (a) sampled while it runs, each sample one statement (one
// snapshot), and (b) by replaying every instance's history in commit order.
func TestConcurrencyLimitTwoNodes(t *testing.T) {
	b := postgresBackend(t)
	addr := b.newDB(t)
	handlers := map[string]engine.Handler{"work": work}
	nodes := []*node{
		newNode(t, b, addr, nodeOpts{workers: 4, handlers: handlers}),
		newNode(t, b, addr, nodeOpts{workers: 4, handlers: handlers}),
	}
	for _, d := range twoNodeDefs {
		nodes[0].define(d)
	}
	ctx := context.Background()

	var stop atomic.Bool
	var samples atomic.Int64
	sampled := make(chan error, 1)
	go func() { sampled <- sampleHolders(ctx, nodes[1].st, &stop, &samples) }()

	const perNode, starters = 60, 4
	var wg sync.WaitGroup
	var mu sync.Mutex
	var ids []string
	for ni, n := range nodes {
		for s := range starters {
			wg.Go(func() {
				for i := range perNode / starters {
					def, key := "lim", fmt.Sprintf("k%d", (s+i)%3)
					if i%4 == 3 {
						def, key = "room", "r"
					}
					id := fmt.Sprintf("n%d-s%d-%02d", ni, s, i)
					inst, err := n.eng.StartWorkflow(ctx, engine.StartParams{ID: id, Definition: def, Input: json.RawMessage(fmt.Sprintf(`{"k": %q}`, key))})
					if err != nil {
						t.Errorf("start %s: %v", id, err)
						return
					}
					mu.Lock()
					ids = append(ids, inst.ID)
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	waitFinished(t, nodes[0].st, ids, 60*time.Second)
	stop.Store(true)
	if err := <-sampled; err != nil {
		t.Error(err)
	}
	if samples.Load() == 0 {
		t.Error("the sampler took no sample")
	}
	replayHolders(t, addr, len(ids))
}

// sampleHolders counts the RUNNING and PAUSED instances per key, each
// count one List statement (one snapshot), until stop.
func sampleHolders(ctx context.Context, st store.Backend, stop *atomic.Bool, samples *atomic.Int64) error {
	for !stop.Load() {
		for _, status := range []workflow.Status{workflow.StatusRunning, workflow.StatusPaused} {
			page, err := st.List(ctx, store.ListParams{Status: status, Limit: store.MaxListLimit})
			if err != nil {
				return fmt.Errorf("sample: %w", err)
			}
			held := map[string]int{}
			for _, inst := range page.Instances {
				var in struct{ K string }
				if err := json.Unmarshal(inst.Input, &in); err != nil {
					return err
				}
				key := inst.Definition + "/" + in.K
				if held[key]++; held[key] > limitOf(inst.Definition) {
					return fmt.Errorf("sample: %d %s instances of key %s, limit %d", held[key], status, key, limitOf(inst.Definition))
				}
			}
			samples.Add(1)
		}
	}
	return nil
}

// waitFinished polls until every instance is COMPLETED or CANCELLED.
func waitFinished(t *testing.T, st store.Backend, ids []string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for _, id := range ids {
		for {
			inst, err := st.Get(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if inst.Status == workflow.StatusCompleted || inst.Status == workflow.StatusCancelled {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s is still %s", id, inst.Status)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// slotEvent is one instance taking (+1) or freeing (-1) a slot of its key
// at the commit time of the transaction that wrote it.
type slotEvent struct {
	key   string
	tx    string // the writing transaction (xmin)
	at    time.Time
	delta int
	id    string
}

// replayHolders replays the history of every instance in commit order and
// fails t if a key ever has more holders than its limit.
//
// The order is each history row's transaction's commit timestamp
// (pg_xact_commit_timestamp of its xmin; the test cluster tracks them).
// Two transactions that take a slot of one key hold its advisory lock
// until they commit, so they commit one after the other, in the order of
// their checks; a transaction that frees a slot is counted as a holder by
// every check that does not yet see it committed. Replayed at commit times,
// a holder is counted from its commit until the commit of the write that
// freed it, which is exactly what a check of the key could see. One
// transaction's changes of a key count as one (a start that cancels the
// oldest holder to make room frees and takes a slot at once); at equal
// times slots taken come before slots freed, so the replay never counts
// fewer holders than there were.
func replayHolders(t *testing.T, addr string, instances int) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT h.instance_id, i.definition || '/' || i.concurrency_key, h.version, h.status, pg_xact_commit_timestamp(h.xmin), h.xmin::text
		FROM workflow_history h JOIN workflow_instances i ON i.id = h.instance_id
		WHERE i.concurrency_key IS NOT NULL ORDER BY h.instance_id, h.version`)
	if err != nil {
		t.Fatal(err)
	}
	var events []slotEvent
	seen := map[string]bool{}
	prevID, held := "", false
	for rows.Next() {
		var id, key, status, tx string
		var version int64
		var at *time.Time
		if err := rows.Scan(&id, &key, &version, &status, &at, &tx); err != nil {
			t.Fatal(err)
		}
		if at == nil {
			t.Fatalf("%s version %d has no commit timestamp: track_commit_timestamp is off", id, version)
		}
		if id != prevID {
			prevID, held = id, false
		}
		seen[id] = true
		holds := workflow.Status(status).HoldsSlot()
		switch {
		case holds && !held:
			events = append(events, slotEvent{key: key, tx: tx, at: *at, delta: 1, id: id})
		case !holds && held:
			events = append(events, slotEvent{key: key, tx: tx, at: *at, delta: -1, id: id})
		}
		held = holds
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(seen) != instances {
		t.Fatalf("history of %d instances, want %d", len(seen), instances)
	}
	events = netPerTransaction(events)
	slices.SortStableFunc(events, func(a, b slotEvent) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return b.delta - a.delta // taken before freed
	})
	holders, maxHeld := map[string]int{}, map[string]int{}
	for _, e := range events {
		holders[e.key] += e.delta
		maxHeld[e.key] = max(maxHeld[e.key], holders[e.key])
		def, _, _ := strings.Cut(e.key, "/")
		if holders[e.key] > limitOf(def) {
			t.Errorf("replay: %d holders of %s after %s took a slot at %s, limit %d", holders[e.key], e.key, e.id, e.at.Format(time.RFC3339Nano), limitOf(def))
		}
	}
	for key, n := range holders {
		if n != 0 {
			t.Errorf("replay: %d holders of %s at the end, every instance finished", n, key)
		}
	}
	for key, n := range maxHeld {
		t.Logf("key %s: at most %d holders", key, n)
	}
}

// netPerTransaction sums the events of each transaction per key: what
// one transaction did is seen all at once or not at all.
func netPerTransaction(events []slotEvent) []slotEvent {
	type txKey struct{ tx, key string }
	index := map[txKey]int{}
	var out []slotEvent
	for _, e := range events {
		k := txKey{e.tx, e.key}
		if i, ok := index[k]; ok {
			out[i].delta += e.delta
			out[i].id += "+" + e.id
			continue
		}
		index[k] = len(out)
		out = append(out, e)
	}
	return out
}
