// Package httpapi serves flowd's HTTP API (SPEC section 4): JSON handlers over
// the store, conditional requests with ETag / If-Match, the error table that maps
// store and domain errors to status codes, and a Go client for the API.
//
// It owns HTTP concerns only: no SQL, and no workflow rule that the store or the
// workflow package already enforces.
package httpapi
