// Package tracing owns flowd's OpenTelemetry spans: it names the span
// attributes flowd sets, carries a workflow's trace context as a W3C
// traceparent string, and traces HTTP requests (package store/observed
// makes every store operation and transaction a span with its tracer).
//
// It depends on the OpenTelemetry API only; package tracing/otlp reads the
// OTEL_* environment into a tracer provider that exports (or none: tracing
// is off unless the environment asks for it).
//
// It must stay optional: with tracing off nothing here is installed, and the
// packages that trace (httpapi, engine) hold a nil provider and start no
// span at all.
package tracing
