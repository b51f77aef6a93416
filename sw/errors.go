package sw

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalid is what every *Problems is (errors.Is).
var ErrInvalid = errors.New("invalid serverless workflow document")

// ErrNotPending is returned by Resume for an id that is not a pending item
// (a stale or repeated delivery): there is nothing to write.
var ErrNotPending = errors.New("not a pending item")

// Problems lists every problem of an invalid document, each
// "<json pointer>: <what>".
type Problems struct{ List []string }

func (p *Problems) Error() string {
	return ErrInvalid.Error() + ": " + strings.Join(p.List, "; ")
}

// Is makes errors.Is(err, ErrInvalid) true.
func (p *Problems) Is(target error) bool { return target == ErrInvalid }

// Error is a DSL error: the problem-details object of the specification.
type Error struct {
	Type     string `json:"type"`
	Status   int    `json:"status"`
	Title    string `json:"title,omitempty"`
	Detail   string `json:"detail,omitempty"`
	Instance string `json:"instance"`
}

func (e *Error) Error() string {
	s := fmt.Sprintf("%s (status %d) at %s", e.Type, e.Status, e.Instance)
	if e.Title != "" {
		s += ": " + e.Title
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// The standard error kinds. Their type URI is ErrorTypePrefix + kind.
const (
	KindConfiguration = "configuration"
	KindValidation    = "validation"
	KindExpression    = "expression"
	KindAuthenticate  = "authentication"
	KindAuthorization = "authorization"
	KindTimeout       = "timeout"
	KindCommunication = "communication"
	KindRuntime       = "runtime"
)

// ErrorTypePrefix starts the type URI of every standard error flowd raises.
const ErrorTypePrefix = "https://serverlessworkflow.io/spec/1.0.0/errors/"

// standardTypePrefixes are the spellings of standard error types found in
// documents: the specification's own and the one its conformance tests use.
var standardTypePrefixes = []string{ErrorTypePrefix, "https://serverlessworkflow.io/dsl/errors/types/"}

// ErrorType returns the type URI of the standard error kind.
func ErrorType(kind string) string { return ErrorTypePrefix + kind }

// standardKind returns the kind of a standard error type URI, "" otherwise.
func standardKind(typ string) string {
	for _, p := range standardTypePrefixes {
		if k, ok := strings.CutPrefix(typ, p); ok && k != "" {
			return k
		}
	}
	return ""
}

// typeMatches reports whether an error filter's type matches an error's:
// equal, or both standard types of the same kind whatever their spelling.
func typeMatches(filter, typ string) bool {
	if filter == typ {
		return true
	}
	k := standardKind(filter)
	return k != "" && k == standardKind(typ)
}

var errNotInteger = errors.New("is not an integer")

var (
	errNotString = errors.New("is not a string")
	errNotObject = errors.New("is not an object")
)
