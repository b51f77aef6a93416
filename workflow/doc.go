// Package workflow holds flowd's domain rules: definitions (parsed,
// validated, their graph, templates and expressions) and, by the names
// below, the instance data of package workflow/instance.
//
// It is pure: no I/O, no SQL, no HTTP. Stores, the engine and the API build on it.
package workflow
