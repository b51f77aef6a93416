package faults_test

// A node SIGKILLed in the middle of a transaction: its row lock must not
// outlive it, and its uncommitted change must never become visible.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flowd/flowd/internal/pgtest"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/store/storetest"
	"github.com/flowd/flowd/workflow"
)

// TestCrashTxProcess is run as a child process by TestKilledMidTransaction:
// it begins a transaction, increments the instance's version and counter
// (the row is locked, the change uncommitted), prints crashTxReady and waits
// to be killed.
const (
	crashTxAddrEnv = "FLOWD_FAULTS_CRASH_TX_ADDR" // database URL
	crashTxIDEnv   = "FLOWD_FAULTS_CRASH_TX_ID"   // instance id
	crashTxReady   = "crash-tx: holding the row lock"
	crashTxCause   = "crashing writer"
)

func TestCrashTxProcess(t *testing.T) {
	addr, id := os.Getenv(crashTxAddrEnv), os.Getenv(crashTxIDEnv)
	if addr == "" {
		t.Skip("the child process of TestKilledMidTransaction")
	}
	// The parent holds our stdin: should it die without killing us, EOF
	// ends us. The timer is a last resort.
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(3)
	}()
	time.AfterFunc(2*time.Minute, func() { os.Exit(4) })

	// A node's write in flight is one statement in its transaction: the
	// instance's row updated (and so locked), not committed. flowd's store
	// opens no transaction a caller could hold open, so the test does it
	// on a connection of its own.
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, addr)
	if err != nil {
		fmt.Println("crash-tx: connect:", err)
		os.Exit(2)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		fmt.Println("crash-tx: begin:", err)
		os.Exit(2)
	}
	var version int64
	err = tx.QueryRow(ctx, `WITH u AS (
	UPDATE workflow_instances SET version = version + 1, state = jsonb_set(state, '{variables,`+counterVar+`}', '1'), updated_at = now()
	WHERE id = $1 RETURNING id, version, status, state
), h AS (
	INSERT INTO workflow_history (instance_id, version, status, state, at, cause, actor)
	SELECT id, version, status, state, now(), $2, 'engine' FROM u
)
SELECT version FROM u`, id, crashTxCause).Scan(&version)
	if err != nil {
		fmt.Println("crash-tx: write:", err)
		os.Exit(2)
	}
	fmt.Printf("%s (version %d written, not committed)\n", crashTxReady, version)
	select {} // SIGKILL ends this: no rollback, no Close, no goodbye to the server
}

// TestKilledMidTransaction SIGKILLs a process that holds a row lock inside
// an open transaction. PostgreSQL notices the closed socket at once (the
// session does not linger "idle in transaction" until
// idle_in_transaction_session_timeout), rolls back, and releases the lock: a
// writer that was blocked on the row gets through within a few seconds, the
// dead process's change is never visible, and versions stay contiguous.
func TestKilledMidTransaction(t *testing.T) {
	addr := pgtest.NewDatabase(t)
	st := openStore(t, addr)
	admin := adminConn(t, addr)
	ctx := context.Background()
	const id = "crash-tx"
	createCounter(t, st, id)

	// The child's sessions are told apart by their application_name.
	appName := "flowd-crash-tx-" + store.NewID()[24:]
	sep := "?"
	if strings.Contains(addr, "?") {
		sep = "&"
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashTxProcess$", "-test.count=1", "-test.timeout=3m")
	cmd.Env = append(os.Environ(), crashTxAddrEnv+"="+addr+sep+"application_name="+appName, crashTxIDEnv+"="+id)
	var errOut syncBuffer
	cmd.Stderr = &errOut
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	ready := make(chan struct{})
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		sc := bufio.NewScanner(stdout)
		signalled := false
		for sc.Scan() {
			fmt.Fprintln(&out, sc.Text())
			if !signalled && strings.HasPrefix(sc.Text(), crashTxReady) {
				signalled = true
				close(ready)
			}
		}
	}()
	exited := make(chan struct{})
	go func() {
		<-readerDone // Wait closes the pipe: read it to the end first
		_ = cmd.Wait()
		close(exited)
	}()
	kill := func() {
		_ = cmd.Process.Kill()
		<-exited
		stdin.Close()
	}
	t.Cleanup(kill)
	childLog := func() string { return out.String() + errOut.String() }

	select {
	case <-ready:
	case <-exited:
		t.Fatalf("the child exited before taking the lock: %s\n%s", cmd.ProcessState, childLog())
	case <-time.After(30 * time.Second):
		t.Fatalf("the child did not take the lock within 30s:\n%s", childLog())
	}

	// The child's session sits idle in its transaction, holding the row.
	sessionStates := func() []string {
		rows, err := admin.Query(ctx, `SELECT state FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1`, appName)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var states []string
		for rows.Next() {
			var s *string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			if s != nil {
				states = append(states, *s)
			} else {
				states = append(states, "?")
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return states
	}
	// The child printed after its statement's answer; the server may still
	// be reporting the session's state, so give it a moment.
	if !waitFor(5*time.Second, func() bool { return slices.Contains(sessionStates(), "idle in transaction") }) {
		t.Fatalf("the child's sessions are %v, want one idle in transaction; all sessions of the database: %v",
			sessionStates(), allSessions(t, admin))
	}
	_, err = admin.Exec(ctx, `SELECT 1 FROM workflow_instances WHERE id = $1 FOR UPDATE NOWAIT`, id)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "55P03" {
		t.Fatalf("FOR UPDATE NOWAIT on the row the child locked: %v, want lock_not_available (55P03)", err)
	}
	// Its change is not visible.
	inst, err := st.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if inst.Version != 0 || counterOf(t, inst.State) != 0 {
		t.Fatalf("the child's uncommitted change is visible: version %d, counter %d", inst.Version, counterOf(t, inst.State))
	}

	// Another writer queues behind the lock...
	type result struct {
		inst *workflow.Instance
		err  error
		at   time.Time
	}
	written := make(chan result, 1)
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	go func() {
		inst, err := storetest.Modify(wctx, st, id, func(inst *workflow.Instance) error { return increment(&inst.State) }, "survivor")
		written <- result{inst, err, time.Now()}
	}()
	waiting := waitFor(10*time.Second, func() bool {
		var n int
		err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND application_name <> $1 AND wait_event_type = 'Lock'`, appName).Scan(&n)
		return err == nil && n > 0
	})
	if !waiting {
		t.Fatal("the second writer never waited for the child's lock")
	}
	select {
	case r := <-written:
		t.Fatalf("the second writer got through while the child held the lock: %+v", r)
	default:
	}

	// ...and gets through once the child is killed.
	kill()
	killedAt := time.Now()
	var r result
	select {
	case r = <-written:
	case <-time.After(10 * time.Second):
		t.Fatalf("the second writer is still blocked 10s after the child was killed; child sessions: %v", sessionStates())
	}
	if r.err != nil {
		t.Fatalf("second writer: %v", r.err)
	}
	unblocked := r.at.Sub(killedAt)
	gone := waitFor(5*time.Second, func() bool { return len(sessionStates()) == 0 })
	goneAfter := time.Since(killedAt)
	if !gone {
		t.Errorf("the killed child's sessions are still there 5s after the kill: %v", sessionStates())
	}
	if unblocked > 3*time.Second {
		t.Errorf("the second writer waited %s after the kill; the server should notice the closed socket at once", unblocked)
	}
	t.Logf("child killed (%s); the blocked writer got through %s later; the child's sessions were gone within %s",
		cmd.ProcessState, unblocked.Round(time.Millisecond), goneAfter.Round(time.Millisecond))

	// The survivor's write is version 1, on counter 0: the child's
	// increment was rolled back, not merged.
	if r.inst.Version != 1 || counterOf(t, r.inst.State) != 1 {
		t.Errorf("second writer wrote version %d counter %d, want 1 and 1", r.inst.Version, counterOf(t, r.inst.State))
	}
	checkCounter(t, st, id)
	h, err := st.History(ctx, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range h {
		if e.Cause == crashTxCause {
			t.Errorf("history version %d was written by the killed transaction", e.Version)
		}
	}
	var idle int
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND state LIKE 'idle in transaction%'`).Scan(&idle); err != nil {
		t.Fatal(err)
	}
	if idle != 0 {
		t.Errorf("%d sessions are still idle in transaction", idle)
	}
	if t.Failed() {
		t.Logf("child output:\n%s", childLog())
	}
}

// allSessions describes every session of the test's database, for a failure
// message.
func allSessions(t *testing.T, admin *pgx.Conn) []string {
	t.Helper()
	rows, err := admin.Query(context.Background(), `SELECT pid, coalesce(application_name, '?'), coalesce(state, '?'), coalesce(backend_type, '?')
		FROM pg_stat_activity WHERE datname = current_database()`)
	if err != nil {
		return []string{err.Error()}
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var pid int32
		var app, state, kind string
		if err := rows.Scan(&pid, &app, &state, &kind); err != nil {
			return append(out, err.Error())
		}
		out = append(out, fmt.Sprintf("pid %d %q %s (%s)", pid, app, state, kind))
	}
	return out
}
