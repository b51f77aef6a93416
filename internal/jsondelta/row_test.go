package jsondelta

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// bigState is a state of at least WholeBelow bytes whose variable v is val.
func bigState(val string) []byte {
	return []byte(`{"pad":"` + strings.Repeat("x", WholeBelow) + `","v":"` + val + `"}`)
}

// The first version and small states are stored whole without reading the
// previous row; a large state changed a little is a patch against it.
func TestRowPolicy(t *testing.T) {
	noRead := func() ([]byte, error) { t.Fatal("the previous row was read"); return nil, nil }
	small := []byte(`{"v":1}`)
	for _, c := range []struct {
		name     string
		version  int64
		old, new []byte
	}{
		{"first version", 0, nil, bigState("a")},
		{"no previous state", 3, nil, bigState("a")},
		{"small state", 3, []byte(`{"v":0}`), small},
	} {
		row, err := Row(c.version, len(c.new), Whole(c.new), diffOf(c.old, c.new), noRead)
		if err != nil || !bytes.Equal(row, c.new) {
			t.Errorf("%s: Row = %s, %v; want the state whole", c.name, row, err)
		}
	}

	old, next := bigState("a"), bigState("b")
	row, err := Row(5, len(next), Whole(next), diffOf(old, next), func() ([]byte, error) { return old, nil })
	if err != nil {
		t.Fatal(err)
	}
	want := `[4,` // based on version 4's snapshot
	if IsSnapshot(row) || !strings.HasPrefix(string(row), want) {
		t.Fatalf("Row of a small change to a large state = %.60s, want a patch row starting %s", row, want)
	}
	replay := NewReplay(Bytewise)
	if err := replay.Next(old); err != nil {
		t.Fatal(err)
	}
	if err := replay.Next(row); err != nil || !bytes.Equal(replay.State(), next) {
		t.Fatalf("replaying the row gives %.60s, %v", replay.State(), err)
	}

	// No previous row (it was never written): a snapshot.
	if row, err := Row(5, len(next), Whole(next), diffOf(old, next), func() ([]byte, error) { return nil, nil }); err != nil || !bytes.Equal(row, next) {
		t.Errorf("Row without a previous row = %.60s, %v; want the state whole", row, err)
	}
	// A previous row that cannot be read fails the write.
	boom := errors.New("boom")
	if _, err := Row(5, len(next), Whole(next), diffOf(old, next), func() ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Errorf("Row with a failing read = %v, want %v", err, boom)
	}
}

// diffOf is the patch function of Row made by Diff; nil without old.
func diffOf(old, new []byte) func() ([]byte, bool, error) {
	if old == nil {
		return nil
	}
	return func() ([]byte, bool, error) { return Diff(old, new, Bytewise) }
}
