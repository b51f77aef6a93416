package httpapi

import (
	"strconv"
	"strings"
)

// Numbers at the API boundary: checkJSON refuses a number whose magnitude
// a float64 cannot hold, measured from its digits and exponent without
// parsing it (no allocation, and an exponent of any length).

// numberEnd returns the index after the number that starts at b[i]: its
// sign, digits, fraction and exponent characters. A malformed number ends
// where they do; the decoder reports it.
func numberEnd(b []byte, i int) int {
	for i < len(b) {
		switch c := b[i]; {
		case '0' <= c && c <= '9', c == '-', c == '+', c == '.', c == 'e', c == 'E':
			i++
		default:
			return i
		}
	}
	return i
}

// The significant digits of the numbers from which a float64 rounds to
// infinity (halfway between the largest float64, 1.7976931348623157e308,
// and 2^1024) and to zero (half the smallest, 2^-1075), and their powers
// of ten. Both are cut at 40 digits, below the exact values: a number with
// the first's digits still rounds to the largest float64, one with the
// second's to zero.
const (
	overflowDigits  = "1797693134862315807937289714053034150799"
	overflowPower   = 308
	underflowDigits = "2470328229206232720882843964341106861825"
	underflowPower  = -324
	maxExponentRead = 1 << 20 // beyond this the exponent is far out either way
)

// float64Holds reports whether the number n (JSON syntax, possibly
// malformed) is zero or has a magnitude a float64 holds: one that does not
// round to infinity or to zero.
func float64Holds(n []byte) bool {
	i := 0
	if i < len(n) && n[i] == '-' {
		i++
	}
	// The first significant digits, how many of them are in the integer
	// part, and the zeros between the point and the first of them.
	var digits [len(overflowDigits)]byte
	nd, intDigits, fracZeros := 0, 0, 0
	for inFraction := false; i < len(n); i++ {
		c := n[i]
		if c == '.' && !inFraction {
			inFraction = true
			continue
		}
		if c < '0' || c > '9' {
			break
		}
		switch {
		case nd == 0 && c == '0':
			if inFraction {
				fracZeros++
			}
			continue
		case !inFraction:
			intDigits++
		}
		if nd < len(digits) {
			digits[nd] = c
		}
		nd++
	}
	if nd == 0 {
		return true // zero
	}
	// The power of ten of the first significant digit.
	power := intDigits - 1
	if intDigits == 0 {
		power = -fracZeros - 1
	}
	if i < len(n) && (n[i] == 'e' || n[i] == 'E') {
		exp, neg := 0, false
		i++
		if i < len(n) && (n[i] == '+' || n[i] == '-') {
			neg = n[i] == '-'
			i++
		}
		for ; i < len(n) && '0' <= n[i] && n[i] <= '9'; i++ {
			if exp < maxExponentRead {
				exp = exp*10 + int(n[i]-'0')
			}
		}
		if neg {
			exp = -exp
		}
		power += exp
	}
	lead := digits[:min(nd, len(digits))]
	switch {
	case power > overflowPower || power < underflowPower:
		return false
	case power == overflowPower:
		return compareDigits(lead, overflowDigits) <= 0 // the bound is cut below the halfway value
	case power == underflowPower:
		return compareDigits(lead, underflowDigits) > 0
	}
	return true
}

// compareDigits compares significant digits d, padded with zeros, with
// the digits of a bound.
func compareDigits(d []byte, bound string) int {
	for k := range len(bound) {
		c := byte('0')
		if k < len(d) {
			c = d[k]
		}
		if c != bound[k] {
			return int(c) - int(bound[k])
		}
	}
	return 0
}

// pointerOf writes the place of checkJSON's levels as a JSON pointer, the
// keys as written (escapes left as they are).
func pointerOf(b []byte, levels []jsonLevel) string {
	if len(levels) == 0 {
		return "the top"
	}
	var p strings.Builder
	for _, l := range levels {
		p.WriteByte('/')
		if l.array {
			p.WriteString(strconv.Itoa(l.index))
			continue
		}
		key := string(b[l.key[0]:l.key[1]])
		p.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(key))
	}
	return p.String()
}

// clipText shows at most 30 bytes of a number in an error.
func clipText(n []byte) string {
	if len(n) > 30 {
		return string(n[:30]) + "…"
	}
	return string(n)
}
