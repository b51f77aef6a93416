// Package tracing owns flowd's OpenTelemetry traces: it reads the standard
// OTEL_* environment into a tracer provider with an OTLP/HTTP exporter (or
// none: tracing is off unless the environment asks for it), names the
// span attributes flowd sets, carries a workflow's trace context as a W3C
// traceparent string, and wraps a store so that every store operation and
// transaction is a span.
//
// It must stay optional: with tracing off nothing here is installed, and the
// packages that trace (httpapi, engine) hold a nil provider and start no
// span at all.
package tracing
