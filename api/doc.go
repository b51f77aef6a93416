// Package api holds the JSON bodies and headers of flowd's HTTP API: one
// definition of each shape, which the server (package httpapi) writes and
// reads and the Go client (package client) reads and writes.
//
// It imports nothing heavy (the instance data of package workflow/instance,
// the standard library), so programs that only talk to a server link none
// of it.
package api
