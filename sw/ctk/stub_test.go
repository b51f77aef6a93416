package ctk

import (
	"net/http"
	"testing"

	"github.com/flowd/flowd/sw/swtest"
)

// The kit's http calls (petstore.swagger.io, httpbin.org) are answered by
// the swtest stub of those services, in process.
func init() {
	newHTTPClient = func(t testing.TB) *http.Client { return swtest.NewStub(t).Client() }
}
