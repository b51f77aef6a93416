package gojq

// This file is flowd's, not upstream gojq's (see README.md and budget.go):
// the bounds of regular expressions. A program can build its expressions
// at run time, so their size, the time a match may take (the program's
// size times the string's length, Go's regular expressions being linear)
// and the number of matches of a global match are bounded, and the cache
// of compiled expressions, which lives as long as the compiled program,
// keeps a few small ones only.

import (
	"regexp/syntax"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// regexpCache is the cache of compiled regular expressions of one Code.
type regexpCache struct {
	sync.Map
	n atomic.Int32
}

const (
	maxCachedRegexps     = 64
	maxCachedRegexpBytes = 1024
)

// store keeps m for key unless the cache is full or the source is long.
func (c *regexpCache) store(key [2]string, m *regexpMatcher) {
	if len(key[0]) <= maxCachedRegexpBytes && c.n.Add(1) <= maxCachedRegexps {
		c.Map.Store(key, m)
	}
}

// regexpShape returns the size of the compiled program of re (source as
// regexp.Compile takes it) and whether it can match the empty string, or
// an error when it is too large. One that does not parse gives 0 and true:
// compiling it reports why.
func regexpShape(re string) (insts int64, empty bool, err error) {
	if len(re) > maxRegexpBytes {
		return 0, false, &LimitError{Kind: LimitWork, Op: "compiling a regular expression", Size: int64(len(re)), Max: maxRegexpBytes}
	}
	p, err := syntax.Parse(re, syntax.Perl)
	if err != nil {
		return 0, true, nil
	}
	if n := regexpInsts(p); n > maxRegexpInsts {
		return 0, false, &LimitError{Kind: LimitWork, Op: "compiling a regular expression", Size: n, Max: maxRegexpInsts}
	} else {
		return n, minMatch(p) == 0, nil
	}
}

// minMatch is the length of the shortest text re can match (at least:
// assertions count as matching nothing).
func minMatch(re *syntax.Regexp) int {
	switch re.Op {
	case syntax.OpNoMatch:
		return 1
	case syntax.OpLiteral:
		return len(re.Rune)
	case syntax.OpCharClass, syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return 1
	case syntax.OpCapture, syntax.OpPlus:
		return minMatch(re.Sub[0])
	case syntax.OpRepeat:
		return re.Min * minMatch(re.Sub[0])
	case syntax.OpConcat:
		n := 0
		for _, s := range re.Sub {
			n += minMatch(s)
		}
		return n
	case syntax.OpAlternate:
		n := minMatch(re.Sub[0])
		for _, s := range re.Sub[1:] {
			n = min(n, minMatch(s))
		}
		return n
	}
	return 0
}

// runeCounter gives the offsets in code points of byte offsets met in
// increasing order, counting along the string once.
type runeCounter struct {
	s    string
	b, r int
}

func (c *runeCounter) at(b int) int {
	if b < c.b {
		c.b, c.r = 0, 0
	}
	c.r += utf8.RuneCountInString(c.s[c.b:b])
	c.b = b
	return c.r
}

// probeCost bounds the steps of one probe for an empty match (see
// regexpMatcher): Go's backtracker clears a bit per instruction and byte,
// at most 256 Ki, and the NFA it uses beyond stops at once.
func probeCost(insts int64, n int) int64 {
	return min(insts*int64(n+1), 1<<18)
}

// regexpInsts estimates the instructions of re once compiled: a
// repetition copies its operand once per count.
func regexpInsts(re *syntax.Regexp) int64 {
	switch re.Op {
	case syntax.OpLiteral:
		return int64(len(re.Rune))
	case syntax.OpCharClass:
		return 1 + int64(len(re.Rune))/16
	case syntax.OpRepeat:
		n := re.Max
		if n < 0 {
			n = re.Min + 1
		}
		return int64(max(n, 1)) * (regexpInsts(re.Sub[0]) + 1)
	case syntax.OpCapture, syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpConcat, syntax.OpAlternate:
		n := int64(2)
		for _, s := range re.Sub {
			n += regexpInsts(s) + 1
		}
		return n
	}
	return 1
}

// matchLimit is the number of matches a global match of r on a string of
// n bytes may return plus one, and the bound that gives it: each match is
// an object of about 400 bytes in memory and at least 48 of JSON, and may
// need a probe for an empty match after it.
func (b *budget) matchLimit(r *regexpMatcher, n int) (int, *LimitError) {
	limit := &LimitError{Kind: LimitValue, Op: "match", Max: b.maxValue}
	most := b.maxValue/48 + 1
	if byHeld := b.maxHeld/4*3/400 + 1; byHeld < most {
		most, limit = byHeld, &LimitError{Kind: LimitHeld, Op: "match", Max: b.maxHeld}
	}
	if r.probe != nil {
		cost := probeCost(r.insts, n)
		if byWork := MaxWork/cost + 1; byWork < most {
			most, limit = byWork, &LimitError{Kind: LimitWork, Op: "match", Size: (byWork + 1) * cost, Max: MaxWork}
		}
	}
	return int(min(most, 1<<30)), limit
}

// RegexpSize returns the estimated instructions of the program of a Go
// regular expression (RE2 syntax, as regexp.Compile takes it), or a
// *LimitError when its source or program is larger than a limited run
// allows. flowd bounds the regular expressions of JSON Schemas with it too.
func RegexpSize(re string) (int64, error) {
	insts, _, err := regexpShape(re)
	return insts, err
}
