package storetest

import (
	"errors"
	"sync"
	"time"
)

// barrier lets n goroutines wait for each other, with a timeout so that one
// failing party cannot hang the test.
type barrier struct {
	arrived sync.WaitGroup
	release chan struct{}
}

func newBarrier(n int) *barrier {
	br := &barrier{release: make(chan struct{})}
	br.arrived.Add(n)
	go func() {
		br.arrived.Wait()
		close(br.release)
	}()
	return br
}

func (br *barrier) wait() error {
	br.arrived.Done()
	select {
	case <-br.release:
		return nil
	case <-time.After(10 * time.Second):
		return errors.New("barrier: the other party never arrived")
	}
}
