// The bounds of schema validation. The validator (santhosh-tekuri/jsonschema)
// reads every number as an exact big.Rat (1e999999 is a million-digit
// power of ten), collects every failure with its location (a 1 MiB array of
// numbers failing `items: {type: string}` made 500,000 of them: 600 MB and
// ten seconds), and its time grows with the value's size times the
// schema's. So before a value is validated: a number too long to hold
// exactly is refused, and so is a value whose size times the schema's
// passes a bound; validity is decided by a schema that stops at the first
// failure; and the failures are listed only for a value small enough.

package sw

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/flowd/flowd/internal/third_party/gojq"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

const (
	// maxSchemaWork bounds the parts of a value (objects, arrays, members,
	// scalars) times the parts of the schema it is validated against.
	maxSchemaWork = 1 << 27
	// maxSchemaDetail is the same product below which every failure is
	// listed (the detail is cut at maxDetail anyway).
	maxSchemaDetail = 1 << 16
	// maxSchemaNumber bounds the digits and the exponent of a number
	// validated: a float64 holds 17 digits and exponents to ±308.
	maxSchemaNumber = 1000
)

// failFastURL is where the schema that decides validity alone is compiled.
const failFastURL = "https://schema.flowd.invalid/valid.json"

// failFast compiles, with c (which holds the document at schemaBase), a
// schema valid exactly when the document is: not(not(document)). The
// validator evaluates what is under `not` for validity alone, stopping at
// the first failure and recording none.
func failFast(c *jsonschema.Compiler) (*jsonschema.Schema, error) {
	wrap := map[string]any{"not": map[string]any{"not": map[string]any{"$ref": schemaBase}}}
	if err := c.AddResource(failFastURL, wrap); err != nil {
		return nil, err
	}
	return c.Compile(failFastURL)
}

// boundedRegexp is the validator's regular expressions (patterns, and
// strings with format regex): Go's, within the bounds of the expression
// runner's (gojq.RegexpSize).
func boundedRegexp(s string) (jsonschema.Regexp, error) {
	insts, err := gojq.RegexpSize(s)
	if err != nil {
		return nil, err
	}
	re, err := regexp.Compile(s)
	if err != nil {
		return nil, err
	}
	return &schemaRegexp{re: re, insts: insts}, nil
}

// schemaRegexp refuses to match a string it would take more than
// gojq.MaxWork steps to search (the program's size times the string's
// length): the validator cannot be told of an error there, so such a
// string does not match.
type schemaRegexp struct {
	re    *regexp.Regexp
	insts int64
}

func (r *schemaRegexp) MatchString(s string) bool {
	if r.insts*int64(len(s)+1) > gojq.MaxWork {
		return false
	}
	return r.re.MatchString(s)
}

func (r *schemaRegexp) String() string { return r.re.String() }

// schemaParts counts the parts of a schema document (its size for
// maxSchemaWork); a pattern counts its program's instructions.
func schemaParts(doc any) int64 {
	switch d := doc.(type) {
	case map[string]any:
		n := int64(1)
		for k, v := range d {
			n++
			if s, ok := v.(string); ok && k == "pattern" {
				if insts, err := gojq.RegexpSize(s); err == nil {
					n += insts
				}
			}
			n += schemaParts(v)
		}
		return n
	case []any:
		n := int64(1)
		for _, v := range d {
			n += schemaParts(v)
		}
		return n
	}
	return 1
}

// errTooLarge says why a value was not validated.
var errTooLarge = errors.New("too large to validate")

// valueParts counts the parts of v, and refuses a number too long or too
// large to be held exactly, naming where it is (the first in key order).
func valueParts(v any) (int64, error) {
	n, fits := countParts(v)
	if fits {
		return n, nil
	}
	at, bad := numberAt(v, "")
	if at != "" {
		at = "at " + at + ": "
	}
	return 0, fmt.Errorf("%sthe number %s is %w (at most %d digits and an exponent of ±%d)", at, clipNumber(bad), errTooLarge, maxSchemaNumber, maxSchemaNumber)
}

// countParts counts the parts of v; fits is false when a number in it
// does not fit (see schemaNumberFits).
func countParts(v any) (n int64, fits bool) {
	switch v := v.(type) {
	case map[string]any:
		n = 1
		for _, e := range v {
			m, ok := countParts(e)
			if !ok {
				return 0, false
			}
			n += m + 1
		}
		return n, true
	case []any:
		n = 1
		for _, e := range v {
			m, ok := countParts(e)
			if !ok {
				return 0, false
			}
			n += m
		}
		return n, true
	case json.Number:
		return 1, schemaNumberFits(string(v))
	}
	return 1, true
}

// numberAt returns the JSON pointer (at: v's own) and the text of the
// first number of v, in key order, that does not fit; "" for none.
func numberAt(v any, at string) (string, string) {
	switch v := v.(type) {
	case map[string]any:
		for _, k := range sortedKeys(v) {
			if p, n := numberAt(v[k], at+"/"+pointerToken(k)); n != "" {
				return p, n
			}
		}
	case []any:
		for i, e := range v {
			if p, n := numberAt(e, at+"/"+strconv.Itoa(i)); n != "" {
				return p, n
			}
		}
	case json.Number:
		if !schemaNumberFits(string(v)) {
			return at, string(v)
		}
	}
	return "", ""
}

// schemaNumberFits reports whether the number n (JSON syntax) has at most
// maxSchemaNumber digits and an exponent within ±maxSchemaNumber.
func schemaNumberFits(n string) bool {
	if len(n) > maxSchemaNumber+8 {
		return false
	}
	i := strings.IndexAny(n, "eE")
	if i < 0 {
		return true
	}
	exp := strings.TrimPrefix(strings.TrimPrefix(n[i+1:], "+"), "-")
	exp = strings.TrimLeft(exp, "0")
	e, err := strconv.Atoi(exp)
	return exp == "" || err == nil && e <= maxSchemaNumber
}

func clipNumber(n string) string {
	if len(n) > 40 {
		return n[:40] + "…"
	}
	return n
}
