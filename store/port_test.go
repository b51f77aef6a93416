package store_test

import (
	"reflect"
	"testing"

	"github.com/flowd/flowd/store"
)

// maxBackendMethods bounds the store port: every method is one more thing
// each backend, and every wrapper of one, has to implement. 33: the 30 of
// the storage rebuild; GetWithAttemptsInFlight, since the read a reader is
// shown is not the read a write is decided on (Get), and one method with a
// mode would blur which is which; and BulkStore's two (a bulk operation's
// record is written by compare-and-set of its version and read by id or
// status; no other method stores a row that is neither an instance nor
// kept beside one).
const maxBackendMethods = 33

// TestBackendIsNarrow: the port has at most maxBackendMethods methods.
func TestBackendIsNarrow(t *testing.T) {
	if n := reflect.TypeFor[store.Backend]().NumMethod(); n > maxBackendMethods {
		t.Errorf("store.Backend has %d methods, at most %d", n, maxBackendMethods)
	}
}

// TestBackendTakesNoFunction: no method of the port takes a function,
// directly or in a field of its parameters, so that no caller's code runs
// inside a store's transaction: what a store decided in a transaction
// comes back in its results, after the transaction has ended.
func TestBackendTakesNoFunction(t *testing.T) {
	backend := reflect.TypeFor[store.Backend]()
	for i := range backend.NumMethod() {
		m := backend.Method(i)
		for j := range m.Type.NumIn() {
			for _, path := range funcsIn(m.Type.In(j), m.Name, map[reflect.Type]bool{}) {
				t.Errorf("%s takes a function: %s", m.Name, path)
			}
		}
	}
}

// funcsIn returns the paths, from path, of the function types that a
// value of type typ holds: itself, its elements, its fields. Interfaces
// are not followed: their methods are the callee's, not the caller's.
func funcsIn(typ reflect.Type, path string, seen map[reflect.Type]bool) []string {
	if seen[typ] {
		return nil
	}
	seen[typ] = true
	switch typ.Kind() {
	case reflect.Func:
		return []string{path + " (" + typ.String() + ")"}
	case reflect.Pointer:
		return funcsIn(typ.Elem(), path, seen)
	case reflect.Slice, reflect.Array, reflect.Chan:
		return funcsIn(typ.Elem(), path+"[]", seen)
	case reflect.Map:
		return append(funcsIn(typ.Key(), path+"{key}", seen), funcsIn(typ.Elem(), path+"{}", seen)...)
	case reflect.Struct:
		var out []string
		for i := range typ.NumField() {
			f := typ.Field(i)
			out = append(out, funcsIn(f.Type, path+"."+f.Name, seen)...)
		}
		return out
	}
	return nil
}
