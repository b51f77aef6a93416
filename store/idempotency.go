package store

import (
	"errors"
	"fmt"
	"time"
)

// IdempotencyKeyTTL is how long an idempotency key stands for the instance
// its first request created: a repeat within it gets that instance, a use
// after it creates a new one (the old row is replaced), and the sweeper
// deletes keys older than it.
const IdempotencyKeyTTL = 24 * time.Hour

// MaxIdempotencyKeyLength bounds CreateParams.IdempotencyKey, in bytes.
const MaxIdempotencyKeyLength = 255

// ErrIdempotencyKeyUsed: Create was given an idempotency key that a live
// earlier create recorded. The error is an *IdempotencyKeyError.
var ErrIdempotencyKeyUsed = errors.New("idempotency key already used")

// IdempotencyKeyError reports a Create whose idempotency key is taken:
// nothing was written. WorkflowID is the instance the key's first request
// created; SameRequest tells whether that request had the same request hash
// (a repeat, to be answered with that instance) or not (a key reused for
// another request).
type IdempotencyKeyError struct {
	Key         string
	WorkflowID  string
	SameRequest bool
}

func (e *IdempotencyKeyError) Error() string {
	if e.SameRequest {
		return fmt.Sprintf("idempotency key %q already created workflow %s", e.Key, e.WorkflowID)
	}
	return fmt.Sprintf("idempotency key %q was used with a different request (it created workflow %s)", e.Key, e.WorkflowID)
}

// Is makes errors.Is(err, ErrIdempotencyKeyUsed) true.
func (e *IdempotencyKeyError) Is(target error) bool { return target == ErrIdempotencyKeyUsed }

// ValidateIdempotencyKey checks a key: 1–255 printable ASCII characters
// (space to tilde), so that it is the same text in an HTTP header, in
// either database and in a log line.
func ValidateIdempotencyKey(key string) error {
	if key == "" || len(key) > MaxIdempotencyKeyLength {
		return fmt.Errorf("%w: an idempotency key has 1 to %d characters, not %d", ErrInvalidArgument, MaxIdempotencyKeyLength, len(key))
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c > 0x7e {
			return fmt.Errorf("%w: an idempotency key has printable ASCII characters only, not byte 0x%02x at %d", ErrInvalidArgument, c, i)
		}
	}
	return nil
}
