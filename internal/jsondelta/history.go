package jsondelta

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// How a version of a workflow's state is stored in its history (the state
// column of workflow_history, on both stores):
//
//   - a snapshot: the state itself, a JSON object;
//   - a patch row: the JSON array [base, cost, patch], where patch turns
//     the previous version's state into this one's, base is the version of
//     the snapshot the run of patches starts from, and cost is the bytes a
//     read of this version goes through: the snapshot's plus every patch's
//     since it, this one's included.
//
// States are objects, so the JSON type tells the two apart, and rows
// written before history stored patches are snapshots as they are.
//
// The policy (SnapshotFactor): a version is stored as a patch while its
// cost stays within SnapshotFactor × its state's size, and as a snapshot
// otherwise (version 0 always). Hence:
//
//   - reading any version goes through at most SnapshotFactor × its size;
//   - a snapshot written at version v (v > 0) is smaller than the bytes
//     read since the previous snapshot b: S(v) < (S(b) + P(b+1..v)) / k,
//     where S is a state's size, P the patches' and k SnapshotFactor.
//     Summed over the snapshots, all snapshots after version 0 together
//     are smaller than (S(0) + P(all)) / (k − 1), so the history of an
//     instance stores at most k/(k − 1) × (S(0) + P(all)) bytes: twice
//     the patches (plus the first state) for k = 2.
//
// For a state that grows by what its steps add, P(all) is about the final
// state, so history stays within about 2× it; a state rewritten again and
// again stores about twice what changed. TestPolicyBound checks both
// bounds on random histories.
const SnapshotFactor = 2

// Entry returns what to store for a new version whose state is new, the
// previous version's state being old and its stored row prevRow (at
// version prevVersion). old == nil means there is no previous version: a
// snapshot. Keys are placed in order o (see Apply).
func Entry(prevRow []byte, prevVersion int64, old, new []byte, o Order) ([]byte, error) {
	if old == nil {
		return new, nil
	}
	patch, ok, err := Diff(old, new, o)
	if err != nil || !ok {
		return new, err
	}
	return entryOf(prevRow, prevVersion, len(new), Whole(new), patch)
}

// Whole is Row's new for a state already encoded as b.
func Whole(b []byte) func() ([]byte, error) { return func() ([]byte, error) { return b, nil } }

// entryOf is the row of a new version whose state is new and whose patch
// from the previous version's state is patch: the patch row while its
// read cost stays within SnapshotFactor × new's size, else new whole.
func entryOf(prevRow []byte, prevVersion int64, size int, new func() ([]byte, error), patch []byte) ([]byte, error) {
	base, cost, err := rowCost(prevRow, prevVersion)
	if err != nil {
		return nil, err
	}
	cost += int64(len(patch))
	if cost > SnapshotFactor*int64(size) {
		return new()
	}
	row := make([]byte, 0, len(patch)+32)
	row = append(row, '[')
	row = strconv.AppendInt(row, base, 10)
	row = append(row, ',')
	row = strconv.AppendInt(row, cost, 10)
	row = append(row, ',')
	row = append(row, patch...)
	return append(row, ']'), nil
}

// rowCost returns the base snapshot and the read cost of a stored row at
// version v.
func rowCost(row []byte, v int64) (base, cost int64, err error) {
	if isObject(row) {
		return v, int64(len(row)), nil
	}
	var head []json.RawMessage
	if err := json.Unmarshal(row, &head); err != nil || len(head) != 3 {
		return 0, 0, fmt.Errorf("%w: history row of version %d is neither a state nor a patch row", errSyntax, v)
	}
	if err := json.Unmarshal(head[0], &base); err != nil {
		return 0, 0, fmt.Errorf("%w: history row of version %d: base: %w", errSyntax, v, err)
	}
	if err := json.Unmarshal(head[1], &cost); err != nil {
		return 0, 0, fmt.Errorf("%w: history row of version %d: cost: %w", errSyntax, v, err)
	}
	return base, cost, nil
}

// IsSnapshot reports whether a stored row is a whole state.
func IsSnapshot(row []byte) bool { return isObject(row) }

// Replay rebuilds full states from stored rows given in version order,
// starting at a snapshot.
type Replay struct {
	order Order
	doc   *Doc
}

// NewReplay returns a Replay for rows whose states were written in order o.
func NewReplay(o Order) *Replay { return &Replay{order: o} }

// Next takes the next version's stored row. It keeps references into row.
func (r *Replay) Next(row []byte) error {
	if isObject(row) {
		doc, err := Parse(row, r.order)
		if err != nil {
			return err
		}
		r.doc = doc
		return nil
	}
	if r.doc == nil {
		return fmt.Errorf("%w: history starts with a patch, not a snapshot", errSyntax)
	}
	patch, err := patchOf(row)
	if err != nil {
		return err
	}
	return r.doc.Apply(patch)
}

// State returns the state of the last version taken.
func (r *Replay) State() []byte { return r.doc.JSON() }

// patchOf returns the patch of a patch row [base, cost, patch].
func patchOf(row []byte) ([]byte, error) {
	var parts []json.RawMessage
	if err := json.Unmarshal(row, &parts); err != nil || len(parts) != 3 {
		return nil, fmt.Errorf("%w: history row is neither a state nor a patch row", errSyntax)
	}
	return parts[2], nil
}

// WholeBelow is the size in bytes under which a version's state is stored
// whole, without reading the previous version's row: a small snapshot costs
// less than the patch's bookkeeping (reading the previous row, diffing; the
// workflow benchmark, whose states are a few hundred bytes, ran 10–15 %
// slower on PostgreSQL with patches), and it bounds what such a version
// stores. The bound above holds for the states from WholeBelow on.
const WholeBelow = 4096

// Row returns what a store writes for version of an instance, whose state
// is new (compact JSON in Go's key order, Bytewise, as the state encoder
// writes it), size bytes long, encoded only when the row holds it. It is
// the snapshot policy every store follows: the first version, and a state
// under WholeBelow bytes, are stored whole; otherwise prevRow is called
// for the previous version's stored row (nil: there is none, a snapshot),
// compact (PostgreSQL's jsonb text has spaces), and patch for the patch
// from the previous version's state to new (ok false: none reproduces
// new, which is then stored whole), and the version is stored as a patch
// row while its read cost allows (Entry). patch is nil when there is no
// previous version. The decisions and the costs are the same on every
// store.
func Row(version int64, size int, new func() ([]byte, error), patch func() ([]byte, bool, error), prevRow func() ([]byte, error)) ([]byte, error) {
	if patch == nil || version == 0 || size < WholeBelow {
		return new()
	}
	prev, err := prevRow()
	if err != nil {
		return nil, err
	}
	if prev == nil {
		return new()
	}
	p, ok, err := patch()
	if err != nil {
		return nil, err
	}
	if !ok {
		return new()
	}
	return entryOf(prev, version-1, size, new, p)
}
