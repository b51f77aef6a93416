// Package jsondelta computes and applies the difference between two JSON
// objects, exactly: applying Diff(old, new) to old gives new byte for byte
// (for compact input), JSON null values, arrays and key order included. It
// is what workflow history stores between two versions of a state (see
// history.go for how a version is stored). It does no I/O.
//
// A patch is a JSON object with up to three members:
//
//	"d": ["k", …]       keys to delete
//	"m": {"k": patch}   keys whose value is an object in both versions: a patch of it
//	"s": {"k": value}   keys to set to value, whatever it is (null, an array, an object)
//
// Arrays and scalars are replaced whole. Unlike an RFC 7396 merge patch, a
// value set to null is kept (it is an "s" member, deletion is "d"), and an
// object set whole is not merged into what was there.
//
// Key order: a key that "s" sets and the object lacks is inserted at its
// sorted position (under the Order given) when the object's keys are in
// that order, and appended otherwise. Go's encoders write sorted keys and
// PostgreSQL's jsonb writes its own order (Order JSONB), so a patch
// reproduces either; Diff falls back to replacing an object whole when the
// rule would not reproduce the new key order.
package jsondelta
