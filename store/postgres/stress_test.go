//go:build stress

package postgres

import (
	"testing"

	"github.com/flowd/flowd/store/storetest"
)

// TestLinearizabilityStress is the long linearizability run:
//
//	go test -tags stress -run Stress ./store/...
func TestLinearizabilityStress(t *testing.T) {
	storetest.RunLinearizability(t, harness(), storetest.StressLinSize)
}
