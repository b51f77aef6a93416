package workflow

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// repeated is a JSON array of elem, about size bytes long.
func repeated(elem string, size int) []byte {
	n := max(1, size/(len(elem)+1))
	return []byte("[" + strings.TrimSuffix(strings.Repeat(elem+",", n), ",") + "]")
}

// members is a JSON object of n keys, each with value.
func members(n int, value string) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"k%d":%s`, i, value)
	}
	return b.String() + "}"
}

// liveAfterDecode is what the values decoded from raw hold: the live heap
// with them minus without them.
func liveAfterDecode(t *testing.T, raw []byte) int64 {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	v, err := exprValue(raw)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(v)
	return int64(after.HeapAlloc) - int64(before.HeapAlloc)
}

// The estimate follows what decoding really holds, for the shapes that
// cost the most per byte of text (small objects, empty containers, short
// scalars) and the cheap ones (long strings): never under half of it, nor
// over twice. Not parallel: it reads the heap of the whole process.
func TestDecodedSizeFollowsTheHeap(t *testing.T) {
	const size = 256 << 10
	shapes := map[string][]byte{
		`{"a":1}`:         repeated(`{"a":1}`, size),
		`{"":1}`:          repeated(`{"":1}`, size),
		`{}`:              repeated(`{}`, size),
		`[]`:              repeated(`[]`, size),
		`1`:               repeated(`1`, size),
		`123456789`:       repeated(`123456789`, size),
		`1.5e300`:         repeated(`1.5e300`, size),
		`true`:            repeated(`true`, size),
		`null`:            repeated(`null`, size),
		`"ab"`:            repeated(`"ab"`, size),
		`"x"×30`:          repeated(`"`+strings.Repeat("x", 30)+`"`, size),
		`"x"×1000`:        repeated(`"`+strings.Repeat("x", 1000)+`"`, size),
		`"x"×100000`:      repeated(`"`+strings.Repeat("x", 100000)+`"`, size),
		`escaped strings`: repeated(`"a\"b\\c\u00e9"`, size),
		`{"a":{}}`:        repeated(`{"a":{}}`, size),
		`[{}]`:            repeated(`[{}]`, size),
		`[[1]]`:           repeated(`[[1]]`, size),
		`{"a":1,"b":2}`:   repeated(`{"a":1,"b":2}`, size),
		`8 keys`:          repeated(members(8, "1"), size),
		`9 keys`:          repeated(members(9, "1"), size),
		`20 keys`:         repeated(members(20, "1"), size),
		`one object`:      []byte(members(25000, "1")),
		`long keys`:       repeated(`{"`+strings.Repeat("k", 40)+`":"v"}`, size),
		`an input`:        []byte(`{"order":{"id":"o-1","lines":` + string(repeated(`{"sku":"A-1","qty":2,"price":19.99,"tags":["x","y"]}`, size)) + `}}`),
	}
	for name, raw := range shapes {
		est, live := DecodedSize(raw), liveAfterDecode(t, raw)
		t.Logf("%-16s text %7d  estimate %9d (%4.1f×)  live %9d (%4.1f×)", name, len(raw), est, float64(est)/float64(len(raw)), live, float64(live)/float64(len(raw)))
		if est < live/2 || est > 2*live {
			t.Errorf("%s: estimate %d bytes, the decoded values hold %d", name, est, live)
		}
	}
}

func TestDecodedSize(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]int64{
		``:                   0,
		`null`:               0,
		`true`:               0,
		`12`:                 decodedBox + 2,
		`"abc"`:              decodedBox + 3,
		`"a\"b"`:             decodedBox + 4, // the text, escapes included: at least what it decodes to
		`[]`:                 decodedArray,
		`[1, 2]`:             decodedArray + 2*(decodedSlot+decodedBox+1),
		`{}`:                 decodedMap,
		`{"ab": 1}`:          decodedMap + decodedSmallMap + 2 + decodedBox + 1,
		`{"a":{"b":[true]}}`: 2*(decodedMap+decodedSmallMap) + 2 + decodedArray + decodedSlot,
		`{"a":"x","b":"y"}`:  decodedMap + decodedSmallMap + 2*(1+decodedBox+1),
		members(9, "null"):   decodedMap + 9*decodedMapSlot + 9*2,
	} {
		if got := DecodedSize([]byte(raw)); got != want {
			t.Errorf("DecodedSize(%s) = %d, want %d", raw, got, want)
		}
	}
	// Text that is not JSON gets an estimate, never a panic.
	for _, raw := range []string{`]]]}}`, `{"a`, `"\`, `{"a":`, `[1,,,2`, `{{{{`, `tru`, `"a":"b"`} {
		if got := DecodedSize([]byte(raw)); got < 0 {
			t.Errorf("DecodedSize(%s) = %d", raw, got)
		}
	}
}

func BenchmarkDecodedSize(b *testing.B) {
	raw := repeated(`{"sku":"A-1","qty":2,"price":19.99,"tags":["x","y"]}`, 1<<20)
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		DecodedSize(raw)
	}
}
