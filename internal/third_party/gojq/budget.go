package gojq

// This file is flowd's, not upstream gojq's (see README.md): the bounds of
// one run. gojq bounds a run's time with its context only, which it checks
// between opcodes; a native (string repetition, join, a global regular
// expression match, setpath with a large index, big-integer arithmetic)
// allocates and computes its whole result in one call, and an array built
// by [f] grows without bound within the time a context allows. A budget is
// charged at every place a run allocates, and refuses, before the memory
// is taken, a value larger than Limits.MaxValueBytes, and a run that would
// hold more than Limits.MaxHeldBytes (budget_held.go).

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strings"
)

// Limits bounds one run of a Code (see Code.RunWithLimits). A field that is
// zero or negative sets no bound.
type Limits struct {
	// MaxValueBytes bounds every value the run builds, measured as the
	// length of its JSON text (strings without their escapes, a float at
	// most 24 bytes; a part shared by several places counts at each, as in
	// the text). An operation that would build a larger value fails the run
	// before it allocates the value.
	MaxValueBytes int64
	// MaxHeldBytes bounds the memory the run holds at any moment: the Go
	// memory (estimated) of the values it has built and still refers to,
	// of the temporaries of the native running, and of its stacks. What
	// the run allocates is counted; each time the count passes
	// MaxHeldBytes, what the run still holds (its inputs aside) is
	// measured, and more than three quarters of MaxHeldBytes fails the
	// run; else the count starts again from what it holds. So a run never
	// holds more than MaxHeldBytes, however much garbage it makes.
	MaxHeldBytes int64
}

// Bounds every limited run has, whatever its Limits: each keeps one native
// call cheap in time and stack where the size bound alone would not.
const (
	// MaxDepth bounds how deeply a value built nests: encoders, comparisons
	// and size walks recurse once per level, and wrapping a value again
	// measures it again (JSON from clients nests 64 levels at most).
	MaxDepth = 1000
	// MaxIntegerBits bounds an exact integer: multiplying, printing and
	// parsing one costs more than linear time in its length.
	MaxIntegerBits = 1 << 16
	// MaxWork bounds the steps of one native call whose time grows faster
	// than its input (comparing every element of an array with every one of
	// another, a regular expression on a string: program size × length).
	MaxWork = 1 << 28
	// maxRegexpBytes and maxRegexpInsts bound a regular expression's source
	// and its compiled program (a repetition multiplies its operand).
	maxRegexpBytes = 1 << 16
	maxRegexpInsts = 1 << 14
	// maxIntegerDigits is the decimal length of a MaxIntegerBits integer;
	// parseNumber reads a longer one as a float (an infinity).
	maxIntegerDigits = MaxIntegerBits*30103/100000 + 1
)

// LimitKind says which bound a LimitError is about.
type LimitKind int

// The bounds of a limited run.
const (
	LimitValue   LimitKind = iota + 1 // a value larger than Limits.MaxValueBytes
	LimitHeld                         // more than Limits.MaxHeldBytes held
	LimitDepth                        // a value nested deeper than MaxDepth
	LimitInteger                      // an integer of more than MaxIntegerBits bits
	LimitWork                         // one operation of more than MaxWork steps
)

// LimitError stops a run that would pass one of its bounds. try, ? and //
// do not catch it: the bound is the run's, not one expression's, and the
// run ends at once.
type LimitError struct {
	Kind LimitKind
	// Op is what would pass the bound, as a jq program writes it: `*`,
	// join, [...] (building an array), {...}, .[] (iterating), ….
	Op string
	// Size is what it would reach when that is known before the work is
	// done (a string repetition, a join); 0 when the bound was found while
	// measuring (a walk stops once it passes the bound).
	Size int64
	// Max is the bound passed.
	Max int64
}

func (e *LimitError) Error() string {
	switch e.Kind {
	case LimitValue:
		if e.Size > 0 {
			return fmt.Sprintf("%s would build a value of %d bytes, over the limit of %d bytes", e.Op, e.Size, e.Max)
		}
		return fmt.Sprintf("%s would build a value of more than %d bytes", e.Op, e.Max)
	case LimitHeld:
		return fmt.Sprintf("%s would make the evaluation hold more than %d bytes", e.Op, e.Max)
	case LimitDepth:
		return fmt.Sprintf("%s would build a value nested deeper than %d levels", e.Op, e.Max)
	case LimitInteger:
		return fmt.Sprintf("%s would build an integer of %d bits, over the limit of %d bits", e.Op, e.Size, e.Max)
	default:
		return fmt.Sprintf("%s would take about %d steps, over the limit of %d", e.Op, e.Size, e.Max)
	}
}

// RunWithLimits runs the code like RunWithContext, within lim and the
// fixed bounds (MaxDepth, MaxIntegerBits, MaxWork): a run that would pass
// one of them emits a *LimitError and stops.
func (c *Code) RunWithLimits(ctx context.Context, lim Limits, v any, values ...any) Iter {
	iter := c.RunWithContext(ctx, v, values...)
	if env, ok := iter.(*env); ok {
		env.budget = newBudget(lim, env, append([]any{v}, values...))
	}
	return iter
}

// runFunc is a native that needs the run (_match: its budget).
type runFunc = func(*env, any, []any) any

// budget is what one limited run has spent.
type budget struct {
	maxValue, maxHeld int64
	// allocated counts what the run allocated since what it holds was last
	// measured, that included.
	allocated int64
	env       *env
	inputs    []any
	given     map[uintptr]int // the containers and strings of inputs
	// caps are the capacities of the machine's stacks last charged.
	caps  [6]int
	ticks uint32
	// slots measures the arrays being built by [f], by variable index:
	// their length and JSON size so far, so that each append costs the
	// size of the element only.
	slots []slotSize
	// last is the result of the last setpath and its size: the assignment
	// operators call it once per path on the value the previous call
	// returned, which need not be measured again.
	last sizedValue
}

type slotSize struct {
	n           int
	size, depth int64
}

type sizedValue struct {
	ptr         uintptr
	n           int
	size, depth int64
	pending     bool // sized ahead of the call, which has not returned yet
}

func newBudget(lim Limits, env *env, inputs []any) *budget {
	b := &budget{maxValue: lim.MaxValueBytes, maxHeld: lim.MaxHeldBytes, env: env, inputs: inputs}
	if b.maxValue <= 0 {
		b.maxValue = math.MaxInt64 / 4
	}
	if b.maxHeld <= 0 {
		b.maxHeld = math.MaxInt64 / 4
	}
	return b
}

// stop ends a run with err at once: no fork runs again, so no try or
// alternative sees it.
func (env *env) stop(err error) (any, bool) {
	env.pc, env.forks = len(env.codes), nil
	return err, true
}

// charge counts n bytes op allocates, and measures what the run holds
// when the count passes the bound.
func (b *budget) charge(op string, n int64) error {
	if b.allocated += n; b.allocated <= b.maxHeld {
		return nil
	}
	held := b.held() + n // what op is about to allocate, too
	if held > b.maxHeld/4*3 {
		return &LimitError{Kind: LimitHeld, Op: op, Size: held, Max: b.maxHeld}
	}
	b.allocated = held
	return nil
}

// fits refuses a value of size bytes (exact: a known size; else a
// measured one that stopped past the bound) nested depth levels deep.
func (b *budget) fits(op string, size, depth int64, exact bool) error {
	if depth > MaxDepth {
		return &LimitError{Kind: LimitDepth, Op: op, Max: MaxDepth}
	}
	if size > b.maxValue {
		e := &LimitError{Kind: LimitValue, Op: op, Max: b.maxValue}
		if exact {
			e.Size = size
		}
		return e
	}
	return nil
}

// tick runs before every opcode: every 256th it charges the arrays the
// machine's stacks have grown into (recursion grows them: def f: [f]; f).
func (b *budget) tick(env *env) error {
	if b.ticks++; b.ticks&255 != 0 {
		return nil
	}
	caps := env.stackCaps()
	var grown int64
	for i, c := range caps {
		if c != b.caps[i] {
			grown += int64(c) * stackSlotBytes[i]
		}
	}
	b.caps = caps
	if grown == 0 {
		return nil
	}
	return b.charge("recursion", grown)
}

// stackSlotBytes is the size of a slot of each of stackCaps.
var stackSlotBytes = [6]int64{24, 40, 48, 72, 16, 24}

// stackCaps are the capacities of the machine's stacks and of the
// budget's own slots.
func (env *env) stackCaps() [6]int {
	return [6]int{cap(env.stack.data), cap(env.paths.data), cap(env.scopes.data), cap(env.forks), cap(env.values), cap(env.budget.slots)}
}

// iterate charges the list of paths .[] makes of an array or object of n.
func (b *budget) iterate(n int) error { return b.charge(".[]", 32*int64(n)) }

// append refuses to append elem to arr, the array of [f] held in variable
// slot, when the array would be too large, and charges its growth.
func (b *budget) append(slot int, arr []any, elem any) error {
	for len(b.slots) <= slot {
		b.slots = append(b.slots, slotSize{n: -1})
	}
	m := &b.slots[slot]
	if m.n != len(arr) {
		m.size, m.depth = measure(arr, b.maxValue)
	}
	es, ed := measure(elem, b.maxValue-m.size)
	size := m.size + es
	if len(arr) > 0 {
		size++
	}
	depth := max(m.depth, ed+1)
	if err := b.fits("[...]", size, depth, false); err != nil {
		return err
	}
	m.n, m.size, m.depth = len(arr)+1, size, depth
	if len(arr) == cap(arr) {
		return b.charge("[...]", 16*int64(grownCap(cap(arr))))
	}
	return nil
}

// grownCap is about the capacity append gives a full slice of c.
func grownCap(c int) int {
	if c < 256 {
		return max(2*c, 4)
	}
	return c + (c+3*256)/4
}

// object checks an object built by {...} and charges it.
func (b *budget) object(m map[string]any) error {
	size, depth := measure(m, b.maxValue)
	if err := b.fits("{...}", size, depth, false); err != nil {
		return err
	}
	return b.charge("{...}", mapMem(len(m)))
}

// measure returns the JSON size of v (see Limits.MaxValueBytes) and how
// deeply it nests, stopping once the size passes max or the depth
// MaxDepth.
func measure(v any, max int64) (size, depth int64) {
	s := sizer{max: max}
	s.add(v, 0)
	return s.n, s.depth
}

// escapedSize is the length of v's JSON text with strings escaped, as
// tojson writes it; it stops once it passes max.
func escapedSize(v any, max int64) (size, depth int64) {
	s := sizer{max: max, escapes: true}
	s.add(v, 0)
	return s.n, s.depth
}

type sizer struct {
	max, n, depth int64
	escapes       bool
}

func (s *sizer) add(v any, d int64) {
	switch v := v.(type) {
	case nil:
		s.n += 4
	case bool:
		if v {
			s.n += 4
		} else {
			s.n += 5
		}
	case int:
		s.n += intLen(v)
	case float64:
		s.n += floatLen(v)
	case *big.Int:
		s.n += bigLen(v)
	case json.Number:
		s.n += int64(len(v))
	case string:
		if s.escapes {
			s.n += escapedLen(v)
		} else {
			s.n += int64(len(v)) + 2
		}
	case []any:
		if s.open(d) {
			s.n += 2 + int64(max(len(v)-1, 0))
			for _, e := range v {
				if s.n > s.max {
					return
				}
				s.add(e, d+1)
			}
		}
	case map[string]any:
		if s.open(d) {
			s.n += 2 + int64(max(len(v)-1, 0))
			for k, e := range v {
				if s.n > s.max {
					return
				}
				if s.escapes {
					s.n += escapedLen(k) + 1
				} else {
					s.n += int64(len(k)) + 3
				}
				s.add(e, d+1)
			}
		}
	}
}

// open enters a container at depth d, unless the walk is over its bounds.
func (s *sizer) open(d int64) bool {
	s.depth = max(s.depth, d+1)
	if d >= MaxDepth {
		s.n = s.max + 1
		return false
	}
	return s.n <= s.max
}

func intLen(v int) int64 {
	n := int64(1)
	if v < 0 {
		n++
		if v == math.MinInt {
			return 20
		}
		v = -v
	}
	for v >= 10 {
		v /= 10
		n++
	}
	return n
}

func floatLen(v float64) int64 {
	if v == math.Trunc(v) && math.Abs(v) < 1e17 {
		return intLen(int(v))
	}
	return 24
}

func bigLen(v *big.Int) int64 { return int64(v.BitLen())*30103/100000 + 2 }

// escapedLen is the length of s as a JSON string: quotes, and \uXXXX for a
// control character (an upper bound: \n and \t take two).
func escapedLen(s string) int64 {
	n := int64(len(s)) + 2
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			n++
		case c < 0x20 || c == 0x7f:
			n += 5
		}
	}
	return n
}

// The memory of values, as Go allocates them on amd64: a string's bytes
// and its header boxed in an interface; an array's slots; a map's groups
// of eight slots (one group below nine entries).
func strMem(n int) int64 { return 16 + int64(n) }
func arrMem(n int) int64 { return 24 + 16*int64(n) }
func mapMem(n int) int64 {
	switch {
	case n == 0:
		return 48
	case n <= 8:
		return 336
	default:
		return 80 * int64(n)
	}
}

// shallowMem is the memory of v itself, not of the values it holds.
func shallowMem(v any) int64 {
	switch v := v.(type) {
	case string:
		return strMem(len(v))
	case []any:
		return arrMem(len(v))
	case map[string]any:
		return mapMem(len(v))
	case *big.Int:
		return 32 + int64(v.BitLen()+7)/8
	case nil, bool:
		return 0
	default:
		return 8
	}
}

// deepMem is the memory of v and everything it holds, for results all new.
func deepMem(v any) int64 {
	n := shallowMem(v)
	switch v := v.(type) {
	case []any:
		for _, e := range v {
			n += deepMem(e)
		}
	case map[string]any:
		for k, e := range v {
			n += int64(len(k)) + deepMem(e)
		}
	}
	return n
}

// opName writes a native's name as a program writes it.
func opName(name string) string {
	switch name {
	case "_add":
		return "`+`"
	case "_subtract":
		return "`-`"
	case "_multiply":
		return "`*`"
	case "_divide":
		return "`/`"
	case "_modulo":
		return "`%`"
	case "_negate":
		return "negation"
	case "_match":
		return "match"
	case "_setpath", "setpath":
		return "setpath (an assignment)"
	case "_delpaths", "delpaths":
		return "delpaths"
	case "_index":
		return "indexing"
	case "format":
		return "a @format"
	}
	if strings.HasPrefix(name, "_to") {
		return "@" + strings.TrimPrefix(name, "_to")
	}
	return strings.TrimPrefix(name, "_")
}
