package gojq_test

// flowd's tests of the bounds of a limited run (budget*.go).

import (
	"context"
	"errors"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/third_party/gojq"
)

var testLimits = gojq.Limits{MaxValueBytes: 4 << 20, MaxHeldBytes: 16 << 20}

// bombLimits are smaller, so that a bomb that fills them fails sooner.
var bombLimits = gojq.Limits{MaxValueBytes: 1 << 20, MaxHeldBytes: 4 << 20}

func compile(t *testing.T, src string) *gojq.Code {
	t.Helper()
	q, err := gojq.Parse(src)
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	code, err := gojq.Compile(q)
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	return code
}

// first runs code on v and returns its first result (nil for none).
func first(ctx context.Context, code *gojq.Code, lim *gojq.Limits, v any) any {
	var it gojq.Iter
	if lim != nil {
		it = code.RunWithLimits(ctx, *lim, v)
	} else {
		it = code.RunWithContext(ctx, v)
	}
	r, _ := it.Next()
	return r
}

// TestLimitsStopBombs runs programs that build far more than the limits
// (most would take gigabytes, or crash the process): each fails with the
// bound it passes, before the memory is taken, well within its time.
func TestLimitsStopBombs(t *testing.T) {
	cases := []struct {
		src  string
		kind gojq.LimitKind
	}{
		{`("x"*1e9) as $a | ($a+$a+$a+$a)`, gojq.LimitValue},
		{`("x" * 2147483000) | length > 0`, gojq.LimitValue},
		{`[range(10000)] | map("x"*100000) | length`, gojq.LimitValue},
		{`reduce range(40) as $i ("x"; . + .)`, gojq.LimitValue},
		{`("x"*1000) as $s | [range(10000)] | join($s)`, gojq.LimitValue},
		{`"x"*4000000 | split("")`, gojq.LimitValue},
		{`"x"*4000000 | . / "x"`, gojq.LimitValue},
		{`"x"*4000000 | explode`, gojq.LimitValue},
		{`"\u0001" * 1000000 | tojson`, gojq.LimitValue},
		{`"<" * 2000000 | @html`, gojq.LimitValue},
		{`"%c" * 1000000 | . as $f | 0 | strftime($f)`, gojq.LimitValue},
		{`.[1e8] = 1`, gojq.LimitValue},
		{`setpath([100000000]; 1)`, gojq.LimitValue},
		{`reduce range(40) as $i (1; [., .]) | length`, gojq.LimitValue},
		{`reduce range(40) as $i ({}; {a: ., b: .}) | length`, gojq.LimitValue},
		{`reduce range(40) as $i ({}; .a = . | .b = .a) | length`, gojq.LimitValue},
		{`reduce range(40) as $i ([1]; . + .) | length`, gojq.LimitHeld},
		{`[[range(30000)]] + [range(30000) | []] | transpose`, gojq.LimitValue},
		{`[range(1e9)] | length`, gojq.LimitHeld},
		{`def f: [f]; f`, gojq.LimitHeld},
		{`def f: 1 + f; f`, gojq.LimitHeld},
		{`def f($n): ("x"*1000000 + ($n|tostring)) as $a | if $n > 0 then f($n-1) else $a end | length; f(15)`, gojq.LimitHeld},
		{`"x"*1000000 | [match("";"g")] | length`, gojq.LimitWork},
		{`"x"*200000 | [match("x";"g")] | length`, gojq.LimitHeld},
		{`"[" + ("{}," * 300000) + "{}]" | fromjson | length`, gojq.LimitHeld},
		{`reduce range(100000) as $i (null; [.])`, gojq.LimitDepth},
		{`setpath([range(2000) | 0]; 1)`, gojq.LimitDepth},
		{`reduce range(2000) as $i (2; . * .)`, gojq.LimitInteger},
		{`(reduce range(15) as $i (2; . * .) / 4) as $y | $y * $y | . + . | . + . | . + . | . + .`, gojq.LimitInteger},
		{`[range(20000)] as $a | $a - $a`, gojq.LimitWork},
		{`[range(30000)] as $a | $a | contains($a)`, gojq.LimitWork},
		{`("x"*100000) | indices("x"*50000)`, gojq.LimitWork},
		{`"x"*1000000 | test("(x|y){1000}z")`, gojq.LimitWork},
		{`"x" | test("a{1000}" * 100)`, gojq.LimitWork},
		// A limit is not an error a program can catch or step around.
		{`try ("x"*1e9) catch "caught"`, gojq.LimitValue},
		{`("x"*1e9)? // "alternative"`, gojq.LimitValue},
		{`first(("x"*1e9), 1)`, gojq.LimitValue},
		{`[.[]?, ("x"*1e9)] | length`, gojq.LimitValue},
		{`label $out | ("x"*1e9), break $out`, gojq.LimitValue},
		{`try (def f: [f]; f) catch 0`, gojq.LimitHeld},
	}
	for _, c := range cases {
		code := compile(t, c.src)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		start := time.Now()
		v := first(ctx, code, &bombLimits, nil)
		took := time.Since(start)
		runtime.ReadMemStats(&after)
		cancel()
		var le *gojq.LimitError
		if err, _ := v.(error); !errors.As(err, &le) || le.Kind != c.kind {
			t.Errorf("%s: got %v (after %v), want a limit error of kind %d", c.src, v, took, c.kind)
			continue
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 32<<20 {
			t.Errorf("%s: allocated %d MiB before failing, want at most 32", c.src, alloc>>20)
		}
		if testing.Verbose() {
			t.Logf("%v %s", took, c.src)
		}
		if !strings.Contains(le.Error(), "would") {
			t.Errorf("%s: the error %q does not say what would pass the bound", c.src, le)
		}
	}
}

// TestLimitErrorSaysWhat checks the messages of the bounds: the operation
// and the limit.
func TestLimitErrorSaysWhat(t *testing.T) {
	for src, want := range map[string]string{
		`"x" * 1e9`:                            "`*` would build a value of 1000000002 bytes, over the limit of 4194304 bytes",
		`[range(1e9)]`:                         "[...] would make the evaluation hold more than 16777216 bytes",
		`[range(10) | "x"*1000000]`:            "[...] would build a value of more than 4194304 bytes",
		`reduce range(2000) as $i (2; . * .)`:  "`*` would build an integer of 65538 bits, over the limit of 65536 bits",
		`reduce range(2000) as $i (null; [.])`: "[...] would build a value nested deeper than 1000 levels",
	} {
		v := first(context.Background(), compile(t, src), &testLimits, nil)
		if err, _ := v.(error); err == nil || err.Error() != want {
			t.Errorf("%s: got %v, want %q", src, v, want)
		}
	}
}

// TestLimitsKeepResults runs ordinary programs, some of them heavy (a
// reduce that copies its accumulator thousands of times, a global match
// with thousands of matches), with and without limits: the results are
// the same.
func TestLimitsKeepResults(t *testing.T) {
	doc := map[string]any{
		"a":     map[string]any{"b": []any{1, 2, 3}, "c": "x"},
		"items": []any{map[string]any{"id": "p1", "n": 2}, map[string]any{"id": "p2", "n": 5}},
		"text":  "The quick brown fox, jumps over the lazy dog",
	}
	for _, src := range []string{
		`.`, `.a.b | add`, `.items | map(.n * 2)`, `.items | INDEX(.id)`, `[.items[] | select(.n > 2) | .id]`,
		`.a.b.c = 1`, `.a.b[5] = 1`, `setpath(["x", 0, "y"]; 1)`, `del(.a)`, `delpaths([["a", "b", 0], ["items"]])`,
		`.a.b[1:2] = ["x", "y"]`, `.a.b |= map(. + 1)`, `.items[] |= .n`, `map_values(type)`, `to_entries`,
		`with_entries(.key |= ascii_upcase)`, `[paths]`, `tostream`, `fromstream(tostream)`,
		`walk(if type == "number" then . + 1 else . end)`, `.a * {"b": 1, "d": {"e": 2}}`, `.items | group_by(.n)`,
		`.items | unique_by(.id)`, `.items | min_by(.n)`, `[.a.b, .a.b] | transpose`, `[.a.b[]] | combinations | tostring`,
		`.text | split(" ")`, `.text | [splits(", *")]`, `.text | gsub("o"; "0")`, `.text | sub("(?<x>q)"; "\(.x)Q")`,
		`.text | [match("o"; "g") | .offset]`, `.text | capture("(?<first>\\w+)")`, `.text | [scan("\\w+")]`,
		`.text | test("FOX"; "i")`, `.text | ascii_downcase | explode | implode`, `.text | indices("o")`,
		`.text | @base64 | @base64d`, `.text | @uri`, `.text | @html`, `.a.b | @csv, @tsv, @sh`, `tojson | fromjson`,
		`"\(.a)"`, `.a | tostring`, `.a.b | join("-")`, `[.a.b[] | tostring] | join(", ")`, `.a.b | contains([2])`,
		`[2] | inside([1, 2])`, `9007199254740993 * 9007199254740993`, `pow(2; 64)`, `1e1000`, `-1e1000 | tostring`,
		`[limit(3; range(100))]`, `first(range(10; 20))`, `[range(0; 10; 3)]`, `try error("x") catch .`, `.missing // "default"`,
		`[.[] | numbers]`, `env | length`, `$ENV | length`, `now | type`,
		`0 | todate`, `"2015-03-05T23:51:47Z" | fromdate`, `[range(20000)] | map(. * 2) | add`,
		`reduce range(1500) as $x ([]; . + [$x]) | length`, `reduce range(1000) as $x ({}; .["k\($x)"] = $x) | length`,
		`[range(3000)] | .[] |= . + 1 | add`, `[range(5000)] | map(tostring) | join(",") | length`,
		`"a b " * 10000 | [match(" "; "g")] | length`, `"x" * 4000000 | length`, `[range(5000) | {a: .}] | length`,
		`"1" * 100000 | tonumber`, `[range(100) | [range(100)]] | transpose | length`, `"x" * 1000 | test("x{1000}")`,
	} {
		code := compile(t, src)
		start := time.Now()
		want := first(context.Background(), code, nil, doc)
		got := first(context.Background(), code, &testLimits, doc)
		if _, ok := want.(error); ok {
			if _, ok := got.(error); !ok {
				t.Errorf("%s: got %v, want the error %v", src, got, want)
			}
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %.200v, want %.200v", src, got, want)
		}
		if testing.Verbose() {
			t.Logf("%v %s", time.Since(start), src)
		}
	}
}

// TestLimitedRunsShareACode runs one compiled program, regular expressions
// included, in several goroutines at once, each with its own limits.
func TestLimitedRunsShareACode(t *testing.T) {
	code := compile(t, `[range(200) | tostring | select(test("^1\(. | length)"))] | length`)
	want := first(context.Background(), code, nil, nil)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				if got := first(context.Background(), code, &testLimits, nil); !reflect.DeepEqual(got, want) {
					t.Errorf("got %v, want %v", got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestEnvironmentIsNotVisible: env and $ENV read nothing of the process's
// environment (a server's may hold a database password).
func TestEnvironmentIsNotVisible(t *testing.T) {
	t.Setenv("FLOWD_DB", "postgres://u:secret@db/flowd")
	for _, src := range []string{`env.FLOWD_DB`, `$ENV.FLOWD_DB`, `env | length`, `[$ENV[]] | length`} {
		v := first(context.Background(), compile(t, src), &testLimits, nil)
		if v != nil && v != 0 {
			t.Errorf("%s: got %v, want nothing of the environment", src, v)
		}
	}
}

// TestTimeStaysTheContexts: a program that allocates nothing runs until
// its context ends.
func TestTimeStaysTheContexts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	v := first(ctx, compile(t, `def f: f; f`), &testLimits, nil)
	if err, _ := v.(error); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("got %v, want the context's deadline", v)
	}
}
