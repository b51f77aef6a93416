// Package otlp builds the tracer provider that the standard OTEL_*
// environment asks for, exporting over OTLP/HTTP. It is apart from package
// tracing so that what only starts spans (the engine, the worker SDK) does
// not link the SDK and the exporter.
package otlp

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// DefaultServiceName is service.name when OTEL_SERVICE_NAME (or
// OTEL_RESOURCE_ATTRIBUTES) names none.
const DefaultServiceName = "flowd"

// ErrUnsupported is wrapped by the error of FromEnv for an OTEL_* setting
// flowd cannot honour (another exporter or protocol than OTLP over HTTP).
var ErrUnsupported = errors.New("unsupported OpenTelemetry setting")

// Enabled reports whether the environment asks for traces: an OTLP
// endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) or OTEL_TRACES_EXPORTER is "otlp",
// and neither OTEL_SDK_DISABLED=true nor OTEL_TRACES_EXPORTER=none turns
// them off. Settings that would export otherwise than OTLP over HTTP are
// an error wrapping ErrUnsupported, so a misconfiguration is not silently
// ignored.
func Enabled(getenv func(string) string) (bool, error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false, nil
	}
	on := getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "":
	case "none":
		return false, nil
	case "otlp":
		on = true
	default:
		return false, fmt.Errorf("%w: OTEL_TRACES_EXPORTER=%q (flowd exports traces with otlp, or none)", ErrUnsupported, exp)
	}
	if !on {
		return false, nil
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := strings.TrimSpace(getenv(name)); p != "" {
			if p != "http/protobuf" {
				return false, fmt.Errorf("%w: %s=%q (flowd sends traces over http/protobuf)", ErrUnsupported, name, p)
			}
			break // the traces-specific one wins
		}
	}
	return true, nil
}

// FromEnv builds the tracer provider the environment asks for, or returns
// nil (tracing off, nothing installed) when Enabled says no. The exporter
// is OTLP over HTTP, configured by the OTEL_EXPORTER_OTLP_* variables
// (endpoint, headers, timeout, compression, certificates); the sampler by
// OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG and the batching by
// OTEL_BSP_*, as the SDK reads them; the resource by OTEL_SERVICE_NAME
// (default "flowd") and OTEL_RESOURCE_ATTRIBUTES. The caller shuts the
// provider down, which exports what is still buffered.
func FromEnv(ctx context.Context, getenv func(string) string) (*sdktrace.TracerProvider, error) {
	on, err := Enabled(getenv)
	if err != nil || !on {
		return nil, err
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	// Later options win: the environment's service name replaces the default.
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", DefaultServiceName)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
	)
	if err != nil {
		return nil, fmt.Errorf("tracing: resource from OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}
