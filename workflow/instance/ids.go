package instance

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MaxIDLength bounds both instance ids and step ids.
const MaxIDLength = 128

// ErrInvalidID is wrapped by every id validation error.
var ErrInvalidID = errors.New("invalid id")

// ValidateInstanceID checks a client-supplied instance id: 1–128 characters of
// [A-Za-z0-9._:-].
func ValidateInstanceID(id string) error {
	return validateID("workflow id", id, true)
}

// ValidateIDPrefix checks a prefix of instance ids, as a list filter takes
// it: the characters and length of an instance id. "." and "..", reserved as
// whole ids, begin valid ones and are allowed.
func ValidateIDPrefix(prefix string) error {
	if prefix == "." || prefix == ".." {
		return nil
	}
	return validateID("id prefix", prefix, true)
}

// ValidateDefinitionName checks a definition's name: the characters of a
// step id.
func ValidateDefinitionName(name string) error {
	return validateID("definition name", name, false)
}

// ValidateStepID checks a step id: 1–128 characters of [A-Za-z0-9_.-].
func ValidateStepID(id string) error {
	return validateID("step id", id, false)
}

// ValidateStepKey checks a key of state.steps: a step id, or a code
// workflow's step name — 1–128 characters of [A-Za-z0-9._:-], and, for a
// name its code used again in one run, "#N" after it (N ≥ 2).
func ValidateStepKey(key string) error {
	name, n, numbered := strings.Cut(key, "#")
	if numbered {
		if k, err := strconv.Atoi(n); err != nil || k < 2 || strconv.Itoa(k) != n {
			return fmt.Errorf("%w: step %q: what follows '#' must be a number from 2 on", ErrInvalidID, truncate(key))
		}
	}
	return validateID("step id", name, true)
}

func validateID(what, id string, allowColon bool) error {
	if id == "" {
		return fmt.Errorf("%w: %s is empty", ErrInvalidID, what)
	}
	if id == "." || id == ".." {
		// They would be resolved away as URL path segments.
		return fmt.Errorf("%w: %s %q is reserved", ErrInvalidID, what, id)
	}
	if len(id) > MaxIDLength {
		return fmt.Errorf("%w: %s is %d characters long, at most %d are allowed", ErrInvalidID, what, len(id), MaxIDLength)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == '_', c == '.', c == '-', allowColon && c == ':':
		default:
			allowed := "A-Za-z0-9_.-"
			if allowColon {
				allowed = "A-Za-z0-9._:-"
			}
			return fmt.Errorf("%w: %s %q has character %q at offset %d (allowed: %s)", ErrInvalidID, what, truncate(id), c, i, allowed)
		}
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// ValidateName checks an id by the rules of a step id, in an error that does
// not say what the id is for: `"a b" has character ' ' …`, for callers whose
// message names it (a definition's problems).
func ValidateName(id string) error {
	return validateID("", id, false)
}
