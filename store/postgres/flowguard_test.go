package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/store/storetest"
	"github.com/flowd/flowd/workflow"
)

// flowGuardCase is a claim racing a transaction that changes a flow row
// (a key's LEASED count or a rate bucket) after the claim read it: the
// claim's guarded write waits for the row, finds it moved, and the claim
// is left out — nothing leased, no error — while what came before it in
// its transaction (a group's writes) is committed.
type flowGuardCase struct {
	name string
	flow workflow.TaskFlow
	// row makes the flow row as committed before the claim, move changes
	// it in the racing transaction.
	row, move string
}

var flowGuardCases = []flowGuardCase{
	{name: "concurrency", flow: workflow.TaskFlow{ConcurrencyKey: "k", ConcurrencyLimit: 1},
		row:  `INSERT INTO task_concurrency (key, leased) VALUES ('k', 0)`,
		move: `UPDATE task_concurrency SET leased = 1 WHERE key = 'k'`},
	{name: "rate", flow: workflow.TaskFlow{RateKey: "r", RatePerSecond: 1, RateBurst: 1},
		row:  `INSERT INTO flowd_rate_buckets (key, tokens, updated_at) VALUES ('r', 1, now())`,
		move: `UPDATE flowd_rate_buckets SET tokens = 0 WHERE key = 'r'`},
}

// raceFlowRow runs claim while another transaction has made move
// (uncommitted) and commits it once the claim waits for the row; it
// returns claim's error.
func raceFlowRow(t *testing.T, s *Store, move string, claim func() error) error {
	t.Helper()
	ctx := t.Context()
	holder, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := holder.Exec(ctx, move); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- claim() }()
	waitForLockWaiter(t, s, done)
	if err := holder.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("the claim did not end once the row was committed")
		return nil
	}
}

// waitForLockWaiter waits until a session of the database waits for a
// lock (the claim's guarded write, for the row the holder changed); a
// claim that ends first fails t.
func waitForLockWaiter(t *testing.T, s *Store, done chan error) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("the claim ended (%v) without waiting for the row the other transaction holds", err)
		default:
		}
		var n int
		if err := s.pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
	}
	t.Fatal("no session waits for the row")
}

func setupFlowGuard(t *testing.T, tc flowGuardCase) (*Store, *store.Task) {
	t.Helper()
	now := time.Now().UTC()
	s, _ := setup(t, Options{})
	ctx := t.Context()
	create(t, s, store.CreateParams{ID: "w", Status: workflow.StatusRunning})
	create(t, s, store.CreateParams{ID: "other", Status: workflow.StatusRunning})
	task := &store.Task{ID: "t0", InstanceID: "w", StepID: "a", Queue: "q", MaxAttempts: 1, RunAt: now.Add(-time.Minute), Flow: tc.flow}
	if err := storetest.InsertTasks(ctx, s, []*store.Task{task}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, tc.row); err != nil {
		t.Fatal(err)
	}
	return s, task
}

// checkLeftOut checks that the claim leased nothing: t0 is QUEUED.
func checkLeftOut(t *testing.T, s *Store) {
	t.Helper()
	tasks, err := s.TasksOfInstance(t.Context(), "w")
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 1 || tasks[0].Status != store.TaskQueued {
		t.Errorf("t0 after the claim left out: %+v, want QUEUED", tasks[0])
	}
}

// TestClaimFlowGuard: a claim whose key's count or bucket another
// transaction moved after the claim read it leases nothing and fails with
// ErrFlowMiss; a group's claim is left out (nothing claimed) and the
// group's write is still made; neither reports anything held back.
func TestClaimFlowGuard(t *testing.T) {
	t.Parallel()
	for _, tc := range flowGuardCases {
		for _, group := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/group=%v", tc.name, group), func(t *testing.T) {
				t.Parallel()
				s, _ := setupFlowGuard(t, tc)
				other, err := s.Get(t.Context(), "other")
				if err != nil {
					t.Fatal(err)
				}
				st := other.State.Clone()
				if err := st.SetVar("x", 1); err != nil {
					t.Fatal(err)
				}
				write := &store.Write{ID: "other", ExpectedVersion: other.Version, From: other.Status, Status: other.Status,
					State: st, Cause: "group write"}
				var held store.HeldBack
				params := store.ClaimParams{Queues: []string{"q"}, Now: time.Now(), Limit: 10, Owner: "me", Lease: time.Hour}
				var claimed []store.Claimable
				claim := &store.GroupClaim{Params: params}
				err = raceFlowRow(t, s, tc.move, func() error {
					if !group {
						var err error
						claimed, held, err = s.ClaimTasks(t.Context(), params)
						return err
					}
					_, _, err := s.ApplyGroup(t.Context(), nil, []*store.Write{write}, claim)
					claimed, held = claim.Claimed, claim.HeldBack
					return err
				})
				if group && err != nil {
					t.Fatalf("a group whose claim was left out: %v, want it committed", err)
				}
				if !group && !errors.Is(err, store.ErrFlowMiss) {
					t.Fatalf("ClaimTasks = %v, want ErrFlowMiss", err)
				}
				if len(claimed) != 0 {
					t.Errorf("a claim left out returned %d tasks", len(claimed))
				}
				checkLeftOut(t, s)
				// What a claim left out read is stale: it reports no
				// token due (the one stored may be later).
				if held.Any() {
					t.Errorf("a claim left out reported %+v held back", held)
				}
				if after, err := s.Get(t.Context(), "other"); group && (err != nil || after.Version != other.Version+1) {
					t.Errorf("the group's write: %+v, %v; want version %d", after, err, other.Version+1)
				}
			})
		}
	}
}

// TestClaimRolledBackReportsNothing: a claim whose transaction fails at
// COMMIT (here a deferred constraint trigger on the leases) leases
// nothing and reports nothing held back, although its decision held a
// task back: only a committed claim is reported. A group's claim fails
// with the group, whose write is not made either.
func TestClaimRolledBackReportsNothing(t *testing.T) {
	t.Parallel()
	for _, group := range []bool{false, true} {
		t.Run(fmt.Sprintf("group=%v", group), func(t *testing.T) {
			t.Parallel()
			s, _ := setup(t, Options{})
			ctx := t.Context()
			now := time.Now().UTC()
			create(t, s, store.CreateParams{ID: "w", Status: workflow.StatusRunning})
			other := create(t, s, store.CreateParams{ID: "other", Status: workflow.StatusRunning})
			// k has one slot: t0 is leased, t1 held back.
			if err := storetest.InsertTasks(ctx, s, storetest.TasksUnderKey("w", "k", 1, now, "t0", "t1")); err != nil {
				t.Fatal(err)
			}
			if _, err := s.pool.Exec(ctx, `CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS
				$$ BEGIN RAISE EXCEPTION 'refused at commit'; END $$;
				CREATE CONSTRAINT TRIGGER fail_at_commit AFTER UPDATE ON workflow_tasks
				DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse()`); err != nil {
				t.Fatal(err)
			}
			p := store.ClaimParams{Queues: []string{"q"}, Now: now, Limit: 10, Owner: "me", Lease: time.Minute}
			var (
				held store.HeldBack
				err  error
			)
			if group {
				claim := &store.GroupClaim{Params: p}
				_, _, err = s.ApplyGroup(ctx, nil, []*store.Write{{ID: "other", ExpectedVersion: other.Version, From: other.Status,
					Status: other.Status, State: other.State, Cause: "group write"}}, claim)
				held = claim.HeldBack
			} else {
				_, held, err = s.ClaimTasks(ctx, p)
			}
			if err == nil || !strings.Contains(err.Error(), "refused at commit") {
				t.Fatalf("a claim whose COMMIT failed: %v, want the trigger's refusal", err)
			}
			if held.Any() {
				t.Errorf("a claim whose COMMIT failed reported %+v held back", held)
			}
			for _, id := range []string{"t0", "t1"} {
				if got, err := s.Task(ctx, id); err != nil || got.Status != store.TaskQueued {
					t.Errorf("%s after the claim failed: %+v, %v; want QUEUED", id, got, err)
				}
			}
			if after, err := s.Get(ctx, "other"); err != nil || after.Version != other.Version {
				t.Errorf("other after the group failed: %+v, %v; want version %d", after, err, other.Version)
			}
		})
	}
}
