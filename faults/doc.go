// Package faults holds flowd's fault-injection tests against PostgreSQL: a
// server restart and terminated backends in the middle of a concurrent write
// workload, a process SIGKILLed inside an open transaction, the engine running
// workflows across a restart, a heartbeat whose connection is dropped, and the
// HTTP API while the database is stopped or frozen.
//
// The package has no non-test code. Its tests stop, restart, freeze and
// terminate the throwaway PostgreSQL cluster of their test process
// (internal/pgtest), which would disturb any test sharing that cluster; that
// is why they live in a package of their own, with their own TestMain, and
// never run in parallel with each other. Every invariant they check is one of
// the store's and the engine's promises: an update that reported success is there exactly once,
// an update whose outcome is unknown is there at most once, versions and
// history stay contiguous, no task attempt is delivered twice, and the store,
// the engine and the API recover by themselves, without being reopened or
// restarted, once the database is back.
//
// Run them with
//
//	go test -race -count=1 ./faults/ -v
//
// They skip when PostgreSQL is not installed (and fail under CI=true). With
// FLOWD_TEST_POSTGRES_URL naming an external server, the tests that stop,
// restart or freeze the server skip; the others run against it.
package faults
