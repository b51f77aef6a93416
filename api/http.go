package api

import "strconv"

// MaxBodyBytes is the largest request body the server accepts (413 above
// it); a worker's output and a command's stdout are bounded by it too.
const MaxBodyBytes = 1 << 20

// IdempotencyKeyHeader names the header that makes POST /v1/workflows safe
// to repeat: a repeat within 24 hours gets the instance the first request
// created instead of a new one.
const IdempotencyKeyHeader = "Idempotency-Key"

// ETag formats an instance version as a strong entity tag: "4".
func ETag(version int64) string { return `"` + strconv.FormatInt(version, 10) + `"` }
