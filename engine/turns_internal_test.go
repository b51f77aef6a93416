package engine

import (
	"context"
	"errors"
	"testing"
	"time"
)

// users is how many hold or wait for id's turn.
func (ts *turns) users(id string) int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if t := ts.m[id]; t != nil {
		return t.users
	}
	return 0
}

// waitUsers waits until id's turn has n users.
func waitUsers(t *testing.T, ts *turns, id string, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ts.users(id) != n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("turn %s has %d users, want %d", id, ts.users(id), n)
		}
	}
}

// A turn goes to its waiters in the order they came; another instance's
// turn is never waited for; a waiter whose context ends leaves the queue;
// the last one out leaves nothing behind.
func TestTurns(t *testing.T) {
	var ts turns
	ctx := context.Background()
	release, err := ts.take(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	other, err := ts.take(ctx, "b")
	if err != nil {
		t.Fatalf("the turn of another instance: %v", err)
	}
	other()

	got := make(chan int, 3)
	for i := range 3 {
		go func() {
			r, err := ts.take(ctx, "a")
			if err != nil {
				t.Error(err)
				return
			}
			got <- i
			r()
		}()
		// Counted, then parked on the turn a moment later: the next one
		// comes once it surely waits.
		waitUsers(t, &ts, "a", i+2)
		time.Sleep(20 * time.Millisecond)
	}
	gone, cancel := context.WithCancel(ctx)
	left := make(chan error, 1)
	go func() {
		_, err := ts.take(gone, "a")
		left <- err
	}()
	waitUsers(t, &ts, "a", 5)
	cancel()
	if err := <-left; !errors.Is(err, context.Canceled) {
		t.Errorf("a waiter whose context ended: %v, want context.Canceled", err)
	}
	waitUsers(t, &ts, "a", 4)

	release()
	for want := range 3 {
		if i := <-got; i != want {
			t.Errorf("waiter %d had its turn %d-th", i, want+1)
		}
	}
	waitUsers(t, &ts, "a", 0)
	if n := len(ts.m); n != 0 {
		t.Errorf("%d turns left behind", n)
	}
}
