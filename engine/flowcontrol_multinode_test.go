package engine_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/workflow"
)

// Two nodes on one PostgreSQL database run many instances of two
// definitions whose steps share a concurrency key per tenant (limit 2),
// started through both nodes at once; every node's workers claim, in
// batches and one by one, while completions free slots. Two checkers:
//
//   - a sampler reads, over and over while the nodes run, the LEASED tasks
//     of every key in one statement (a consistent snapshot of what is
//     committed) and keeps the largest count seen;
//   - afterwards, the recorded handler runs (inFlight: each run lies inside
//     its task's lease, its start and end numbered on one sequence across
//     both nodes) are swept for the most runs of a tenant in flight at once.
//
// Either exceeding 2 is a lease the limit should have refused. The sampler
// sees the database itself but only at the moments it samples; the runs
// cover every moment but are a lower bound of the leases (a run starts after
// its claim commits and ends before its completion does). Together, and
// with enough contention that a missing lock shows (see the mutation check
// in the commit that added this test), they are the evidence.
func TestStepConcurrencyAcrossNodes(t *testing.T) {
	b := postgresBackend(t)
	const (
		limit     = 2
		tenants   = 3
		instances = 48
	)
	addr := b.newDB(t)
	f := newInFlight()
	handlers := map[string]engine.Handler{"work": keyedHandler(f)}
	na := newNode(t, b, addr, nodeOpts{workers: 6, handlers: handlers})
	nb := newNode(t, b, addr, nodeOpts{workers: 6, handlers: handlers})
	step := func(id, deps string) string {
		return fmt.Sprintf(`  - {id: %s, type: task, handler: work%s, input: {tenant: "{{ .input.tenant }}"}, concurrency: {key: "{{ .input.tenant }}", limit: %d}}
`, id, deps, limit)
	}
	na.define("name: first\nsteps:\n" + step("a", "") + step("b", ", depends_on: [a]"))
	na.define("name: second\nsteps:\n" + step("x", "") + step("y", "") + step("z", ", depends_on: [x, y]"))

	ctx, stop := context.WithCancel(context.Background())
	sampled := map[string]int{}
	var sampler sync.WaitGroup
	sampler.Go(func() {
		conn, err := pgx.Connect(context.Background(), addr)
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close(context.Background())
		for ctx.Err() == nil {
			rows, err := conn.Query(ctx, `SELECT concurrency_key, count(*) FROM workflow_tasks
				WHERE status = 'LEASED' AND concurrency_key IS NOT NULL GROUP BY concurrency_key`)
			if err != nil {
				if ctx.Err() == nil {
					t.Error(err)
				}
				return
			}
			for rows.Next() {
				var (
					key string
					n   int
				)
				if err := rows.Scan(&key, &n); err != nil {
					t.Error(err)
				}
				sampled[key] = max(sampled[key], n)
			}
			rows.Close()
		}
	})

	ids := make([]string, instances)
	var starts sync.WaitGroup
	for i := range instances {
		starts.Go(func() {
			n, def := na, "first"
			if i%2 == 1 {
				n, def = nb, "second"
			}
			ids[i] = fmt.Sprintf("tf-%02d", i)
			n.start(def, ids[i], fmt.Sprintf(`{"tenant": "t%d"}`, i%tenants))
		})
	}
	starts.Wait()
	for _, id := range ids {
		na.waitStatus(id, workflow.StatusCompleted, 60*time.Second)
	}
	stop()
	sampler.Wait()

	for i := range tenants {
		key := fmt.Sprintf("t%d", i)
		if n := sampled[key]; n > limit {
			t.Errorf("tenant %s: the sampler saw %d leased tasks, limit %d", key, n, limit)
		}
		if n := f.maxOverlap(key); n > limit {
			t.Errorf("tenant %s: %d recorded runs overlap, limit %d", key, n, limit)
		}
		if n := f.maxOverlap(key); n < 1 {
			t.Errorf("tenant %s: no run recorded", key)
		}
	}
	t.Logf("largest counts: sampled %v, runs in flight %v", sampled, f.peak)
}
