// The bounds of one evaluation of an expression, the same for every
// runner: flowd's `when` and `foreach` (Expr) and the runtime expressions of
// Serverless Workflow documents (package sw).

package workflow

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/flowd/flowd/internal/third_party/gojq"
)

// ExprTimeout bounds the time of one evaluation: a definition is input
// from users, and a program such as `def f: f; f` must cost a bounded
// amount of a node's time.
const ExprTimeout = time.Second

// defaultExprStateBytes is ExprBudget.MaxStateBytes when it is 0: the
// engine's default bound of a state.
const defaultExprStateBytes = 4 << 20

// exprHeldFactor: an evaluation may hold this many times MaxStateBytes at
// once. Eight evaluations at once (eight hostile requests) then hold
// 8 × 4 × 4 MiB = 128 MiB at the default, which Go's collector (a heap up
// to twice what is live) keeps within the 256 MiB a node may take above its
// idle size; and an evaluation can still hold a few copies of the largest
// state it reads, the unit of its own results.
const exprHeldFactor = 4

// maxExprError bounds the text of an evaluation's error: it is stored in
// the instance (a step's error, a fault's detail), and error(v) can carry a
// value as large as the state.
const maxExprError = 1000

// ExprBudget is what one evaluation may spend: ExprTimeout of time; no
// value it builds larger than MaxStateBytes (the length of its JSON text;
// --max-state-bytes, 0 for the default 4 MiB); at most exprHeldFactor ×
// MaxStateBytes held at once; and the fixed bounds of gojq.LimitError
// (nesting, integers, the steps of one operation). One that would pass a
// bound fails, before the memory is taken, with an *ExprLimitError.
type ExprBudget struct {
	MaxStateBytes int
}

// limits are the budget's bounds of memory.
func (b ExprBudget) limits() gojq.Limits {
	n := int64(b.MaxStateBytes)
	if n <= 0 {
		n = defaultExprStateBytes
	}
	return gojq.Limits{MaxValueBytes: n, MaxHeldBytes: exprHeldFactor * n}
}

// Run evaluates code (compiled from src) on v with the values of its
// variables, within the budget, and returns its first result: nil when it
// gives none or halts without a value. An error says why the evaluation
// failed: the program's own error, or that it took longer than
// ExprTimeout, or an *ExprLimitError.
func (b ExprBudget) Run(ctx context.Context, code *gojq.Code, src string, v any, vars ...any) (any, error) {
	ctx, cancel := context.WithTimeout(ctx, ExprTimeout)
	defer cancel()
	lim := b.limits()
	r, ok := code.RunWithLimits(ctx, lim, v, vars...).Next()
	if !ok {
		return nil, nil
	}
	err, isErr := r.(error)
	if !isErr {
		return r, nil
	}
	var halt *gojq.HaltError
	var limit *gojq.LimitError
	switch {
	case errors.As(err, &halt) && halt.Value() == nil:
		return nil, nil
	case errors.Is(err, context.DeadlineExceeded):
		return nil, fmt.Errorf("took longer than %s", ExprTimeout)
	case errors.As(err, &limit):
		return nil, &ExprLimitError{Expr: src, Limit: limit, MaxStateBytes: lim.MaxValueBytes}
	}
	return nil, errors.New(clip(err.Error(), maxExprError))
}

// ExprLimitError is an evaluation stopped by its ExprBudget. Its text names
// the expression and the bound; the caller says where the expression is.
type ExprLimitError struct {
	Expr          string
	Limit         *gojq.LimitError
	MaxStateBytes int64
}

func (e *ExprLimitError) Error() string {
	l := e.Limit
	what := l.Error()
	switch l.Kind {
	case gojq.LimitValue:
		if l.Size > 0 {
			what = fmt.Sprintf("%s would build a value of %d bytes, over --max-state-bytes (%d bytes)", l.Op, l.Size, e.MaxStateBytes)
		} else {
			what = fmt.Sprintf("%s would build a value larger than --max-state-bytes (%d bytes)", l.Op, e.MaxStateBytes)
		}
	case gojq.LimitHeld:
		what = fmt.Sprintf("%s would make the evaluation hold more than %d bytes (%d × --max-state-bytes)", l.Op, l.Max, exprHeldFactor)
	}
	return "expression " + strconv.Quote(clip(e.Expr, 80)) + ": " + what
}

// Unwrap returns the bound passed.
func (e *ExprLimitError) Unwrap() error { return e.Limit }

// clip cuts s to at most n bytes, on a character boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
