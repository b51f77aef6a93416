package jsondelta

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
)

// history stores states through Entry as a store does and checks that
// every version replays exactly from its base snapshot.
type history struct {
	rows                  [][]byte
	states                [][]byte
	patchBytes, snapshots int64
}

func (h *history) add(t *testing.T, state []byte) {
	t.Helper()
	var row []byte
	var err error
	if n := len(h.rows); n == 0 {
		row, err = Entry(nil, 0, nil, state, Bytewise)
	} else {
		row, err = Entry(h.rows[n-1], int64(n-1), h.states[n-1], state, Bytewise)
		patch, _, derr := Diff(h.states[n-1], state, Bytewise)
		if derr != nil {
			t.Fatal(derr)
		}
		h.patchBytes += int64(len(patch))
	}
	if err != nil {
		t.Fatal(err)
	}
	if IsSnapshot(row) {
		h.snapshots++
	}
	h.rows = append(h.rows, row)
	h.states = append(h.states, state)
}

func (h *history) stored() int64 {
	var n int64
	for _, r := range h.rows {
		n += int64(len(r))
	}
	return n
}

// read replays version v from its base and returns the bytes read.
func (h *history) read(t *testing.T, v int) int64 {
	t.Helper()
	base := v
	if !IsSnapshot(h.rows[v]) {
		var head []json.RawMessage
		if err := json.Unmarshal(h.rows[v], &head); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(head[0], &base); err != nil {
			t.Fatal(err)
		}
	}
	r := NewReplay(Bytewise)
	var read int64
	for i := base; i <= v; i++ {
		if err := r.Next(h.rows[i]); err != nil {
			t.Fatalf("version %d: %v", i, err)
		}
		read += int64(len(h.rows[i]))
	}
	if got := r.State(); string(got) != string(h.states[v]) {
		t.Fatalf("version %d replays to %s, want %s", v, got, h.states[v])
	}
	return read
}

func randomHex(r *rand.Rand, n int) string {
	b := make([]byte, n/2)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return hex.EncodeToString(b)
}

// TestPolicyBound checks the bounds history.go states: history stores at
// most k/(k−1) × (first state + all patches), a read goes through at most
// k × the version's state (plus the per-row framing), and a state that
// grows by its steps' outputs stores well under 3× its final size.
func TestPolicyBound(t *testing.T) {
	t.Parallel()
	const k = SnapshotFactor
	cases := []struct {
		name string
		next func(r *rand.Rand, i int, cur map[string]any)
	}{
		{"growing: 2 KB per step", func(r *rand.Rand, i int, cur map[string]any) {
			cur["steps"].(map[string]any)[fmt.Sprintf("s%04d", i)] = map[string]any{"status": "COMPLETED", "output": randomHex(r, 2048)}
		}},
		{"rewritten: one variable of 1 KB changes", func(r *rand.Rand, i int, cur map[string]any) {
			cur["variables"].(map[string]any)[fmt.Sprintf("v%d", r.IntN(20))] = randomHex(r, 1024)
		}},
		{"tiny changes of a large state", func(r *rand.Rand, i int, cur map[string]any) {
			if i == 1 {
				for j := range 100 {
					cur["variables"].(map[string]any)[fmt.Sprintf("big%d", j)] = randomHex(r, 1024)
				}
			}
			cur["variables"].(map[string]any)["counter"] = i
		}},
		{"shrinking", func(r *rand.Rand, i int, cur map[string]any) {
			vars := cur["variables"].(map[string]any)
			if i < 50 {
				vars[fmt.Sprintf("v%03d", i)] = randomHex(r, 2048)
			} else {
				delete(vars, fmt.Sprintf("v%03d", 99-i))
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // each case has its own generator and history
			r := rand.New(rand.NewPCG(1, 2))
			cur := map[string]any{"steps": map[string]any{}, "variables": map[string]any{}}
			var h history
			for i := range 100 {
				if i > 0 {
					c.next(r, i, cur)
				}
				b, _ := json.Marshal(cur)
				h.add(t, b)
			}
			first := int64(len(h.states[0]))
			// Each patch row adds its framing ([base,cost,…]): at most 32 bytes.
			limit := (first+h.patchBytes)*k/(k-1) + 32*int64(len(h.rows))
			if got := h.stored(); got > limit {
				t.Errorf("history stores %d bytes, more than the bound %d", got, limit)
			}
			for v := range h.rows {
				read := h.read(t, v)
				if max := k*int64(len(h.states[v])) + 32*int64(v+1); read > max {
					t.Errorf("reading version %d goes through %d bytes, more than %d", v, read, max)
				}
			}
			final := int64(len(h.states[len(h.states)-1]))
			t.Logf("%d versions, %d snapshots, history %d bytes, final state %d bytes (%.2f×), patches %d bytes",
				len(h.rows), h.snapshots, h.stored(), final, float64(h.stored())/float64(final), h.patchBytes)
			if c.name == "growing: 2 KB per step" && h.stored() > 3*final {
				t.Errorf("growing state: history %d bytes is more than 3× the final state (%d)", h.stored(), final)
			}
		})
	}
}

// Version 0 is a snapshot; a malformed row is an error, not a guess.
func TestEntryVersionZeroIsSnapshot(t *testing.T) {
	row, err := Entry(nil, 0, nil, []byte(`{"a":1}`), Bytewise)
	if err != nil || string(row) != `{"a":1}` {
		t.Fatalf("Entry = %s, %v", row, err)
	}
	if _, err := Entry([]byte(`[1,2]`), 3, []byte(`{}`), []byte(`{}`), Bytewise); err == nil {
		t.Error("Entry after a malformed row: want an error")
	}
	r := NewReplay(Bytewise)
	if err := r.Next([]byte(`[0,10,{}]`)); err == nil {
		t.Error("Replay starting with a patch: want an error")
	}
}
