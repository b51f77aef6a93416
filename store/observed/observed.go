// Package observed wraps a store.Backend so that what flowd asks of its
// database can be seen: a span for every store operation and transaction
// (OpenTelemetry, through package tracing's tracer) and every write counted
// in package metrics' collectors. One wrapper does both, so a store call
// crosses one frame and a change of the port is mirrored in one place.
// It observes; it never changes what it wraps.
package observed

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/flowd/flowd/metrics"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/tracing"
)

// Wrap returns s observed.
//
// With tp, every operation is a span: "store.create", "store.apply_each",
// "store.claim_tasks", …, with db.system.name naming the backend and the
// operation's error recorded.
//
// With m, every write is counted in flowd_state_updates_total and
// flowd_update_duration_seconds (each write an ApplyEach made);
// deleted instances in flowd_workflows_deleted_total; and a write that
// failed with store.ErrStorageFull sets flowd_storage_full until a write
// stores something again (store.StorageReporter; without m it never
// reports the database full).
//
// With neither, s itself: an unobserved store pays nothing. The backend's
// notifications (store.Listener) stay visible through the wrapper, and a
// backend that has none does not appear to.
func Wrap(s store.Backend, tp trace.TracerProvider, m *metrics.Metrics) store.Backend {
	if tp == nil && m == nil {
		return s
	}
	o := &observer{m: m}
	if tp != nil {
		o.tracer = tp.Tracer(tracing.TracerName)
		o.system = dbSystem(s)
	}
	b := &backend{querier: querier{q: s, o: o}, passThrough: passThrough{s}}
	if l, ok := s.(store.Listener); ok {
		return &listening{backend: b, Listener: l}
	}
	return b
}

// observer is what the operations report to.
type observer struct {
	tracer trace.Tracer       // nil: no spans
	system attribute.KeyValue // db.system.name of every span
	m      *metrics.Metrics   // nil: no metrics
}

// dbSystem names the backend as the semantic conventions do.
func dbSystem(s store.Backend) attribute.KeyValue {
	system := s.Capabilities().Name
	if system == "postgres" {
		system = "postgresql"
	}
	return attribute.String("db.system.name", system)
}

// listening keeps the backend's notifications visible to the engine's type
// check: a store that cannot Listen must not appear to.
type listening struct {
	*backend
	store.Listener
}

// backend observes the Querier operations (querier) and the writes of the
// rest of the port (backend.go); what it does not name passes through.
type backend struct {
	querier
	// passThrough is one level deeper than querier, so that querier's
	// observed operations win over the backend's own.
	passThrough
}

// passThrough holds the backend whose methods pass through unobserved.
type passThrough struct{ store.Backend }

var (
	_ store.Backend         = (*backend)(nil)
	_ store.StorageReporter = (*backend)(nil)
	_ store.Listener        = (*listening)(nil)
)
