package server

import (
	"context"
	"fmt"
	"os"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/flowd/flowd/tracing/otlp"
)

// tracerProvider is the provider the server traces with: the configured
// one, else the one the OTEL_* environment asks for (own, which the
// server shuts down), else nil: tracing off.
func tracerProvider(ctx context.Context, configured trace.TracerProvider) (tp trace.TracerProvider, own *sdktrace.TracerProvider, err error) {
	if configured != nil {
		return configured, nil, nil
	}
	own, err = otlp.FromEnv(ctx, os.Getenv)
	if err != nil {
		return nil, nil, fmt.Errorf("server: tracing: %w", err)
	}
	if own == nil {
		return nil, nil, nil
	}
	return own, own, nil
}

// tracerFlushTimeout bounds the export of the spans still buffered at
// shutdown: a collector that does not answer must not hold the process.
const tracerFlushTimeout = 5 * time.Second

// shutdownTracer exports what own still buffers and stops it; even a
// shutdown past its deadline gets tracerFlushTimeout for that.
func shutdownTracer(ctx context.Context, own *sdktrace.TracerProvider) error {
	if own == nil {
		return nil
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tracerFlushTimeout)
	defer cancel()
	if err := own.Shutdown(fctx); err != nil {
		return fmt.Errorf("exporting the last spans: %w", err)
	}
	return nil
}
