package gojq

// This file is flowd's, not upstream gojq's (see README.md and budget.go):
// measuring what a run holds. gojq copies a value to change it (`. + [$x]`
// in a reduce copies the array each time), so a run can allocate far more
// than it ever holds; counting allocations alone would fail ordinary
// programs. When the count passes the bound, the values reachable from the
// machine (its stacks, variables and arguments) are measured, each
// container and long string once, the run's inputs and the program's
// constants aside: they were there before the run.

import (
	"math/big"
	"reflect"
	"unsafe"
)

// held measures what the run holds: its values and its stacks.
func (b *budget) held() int64 {
	if b.given == nil {
		b.given = map[uintptr]int{}
		g := holder{seen: b.given}
		for _, v := range b.inputs {
			g.add(v, 0)
		}
		for _, c := range b.env.codes {
			if c.op == oppush || c.op == opconst {
				g.add(c.v, 0)
			}
		}
	}
	h := holder{seen: map[uintptr]int{}, given: b.given}
	var n int64
	env := b.env
	for i, c := range env.stackCaps() {
		n += int64(c) * stackSlotBytes[i]
	}
	for _, s := range env.stack.data {
		n += h.add(s.value, 0)
	}
	for _, s := range env.paths.data {
		n += h.add(s.value.path, 0) + h.add(s.value.value, 0)
	}
	for _, v := range env.values {
		n += h.add(v, 0)
	}
	for _, v := range env.args {
		n += h.add(v, 0)
	}
	return n
}

// holder measures values, each container and long string once; seen
// records them (an array with the length counted: a slice of it may be met
// first), given holds those not to count.
type holder struct {
	seen, given map[uintptr]int
}

// first reports whether p is met for the first time (not given, not seen).
func (h *holder) first(p uintptr) bool {
	_, n := h.counted(p)
	if n < 0 {
		h.seen[p] = 0
	}
	return n < 0
}

// counted returns the map p is recorded in and the length counted, -1
// for none.
func (h *holder) counted(p uintptr) (map[uintptr]int, int) {
	if n, ok := h.given[p]; ok {
		return h.given, n
	}
	if n, ok := h.seen[p]; ok {
		return h.seen, n
	}
	return nil, -1
}

func (h *holder) add(v any, d int) int64 {
	if d > MaxDepth {
		return 0
	}
	switch v := v.(type) {
	case nil, bool:
		return 0
	case string:
		if len(v) < 64 {
			return strMem(len(v))
		}
		if !h.first(uintptr(unsafe.Pointer(unsafe.StringData(v)))) {
			return 16
		}
		return strMem(len(v))
	case []any:
		if cap(v) == 0 {
			return 24
		}
		p := uintptr(unsafe.Pointer(unsafe.SliceData(v)))
		m, from := h.counted(p)
		n := int64(24)
		if from < 0 {
			m, from, n = h.seen, 0, arrMem(cap(v))
		}
		if from < len(v) {
			m[p] = len(v)
			for _, e := range v[from:] {
				n += h.add(e, d+1)
			}
		}
		return n
	case map[string]any:
		if !h.first(reflect.ValueOf(v).Pointer()) {
			return 0
		}
		n := mapMem(len(v))
		for k, e := range v {
			n += int64(len(k)) + h.add(e, d+1)
		}
		return n
	case *big.Int:
		return shallowMem(v)
	case []pathValue:
		if cap(v) == 0 || !h.first(uintptr(unsafe.Pointer(unsafe.SliceData(v)))) {
			return 24
		}
		n := 24 + 32*int64(cap(v))
		for _, p := range v {
			n += h.add(p.path, d+1) + h.add(p.value, d+1)
		}
		return n
	case allocator:
		return mapMem(len(v))
	case *rangeIter:
		return 48 + h.add(v.value, d) + h.add(v.end, d) + h.add(v.step, d)
	default:
		return 8
	}
}
