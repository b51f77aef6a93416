package jsondelta

import "strings"

// Order is the key order of the objects a patch applies to: where Apply puts
// a key the object lacks.
type Order int

const (
	// Bytewise: keys sorted by their bytes, as Go's encoders write maps.
	Bytewise Order = iota
	// JSONB: shorter keys first, equal lengths by their bytes, the order in
	// which PostgreSQL's jsonb keeps and writes keys.
	JSONB
)

func (o Order) compare(a, b string) int {
	if o == JSONB && len(a) != len(b) {
		if len(a) < len(b) {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}

// sorted reports whether keys are strictly increasing under o.
func (o Order) sorted(n int, key func(int) string) bool {
	for i := 1; i < n; i++ {
		if o.compare(key(i-1), key(i)) >= 0 {
			return false
		}
	}
	return true
}

// insertAt is where a new key k goes among n keys: its sorted position when
// the keys are sorted, else the end.
func (o Order) insertAt(n int, key func(int) string, sorted bool, k string) int {
	if !sorted {
		return n
	}
	lo, hi := 0, n
	for lo < hi {
		mid := (lo + hi) / 2
		if o.compare(key(mid), k) < 0 {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}
