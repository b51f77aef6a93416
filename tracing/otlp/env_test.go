package otlp

import (
	"errors"
	"testing"
)

func TestEnabled(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  map[string]string
		want bool
		err  bool
	}{
		{"nothing set", nil, false, false},
		{"endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, true, false},
		{"traces endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, true, false},
		{"exporter otlp alone", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true, false},
		{"sdk disabled", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "TRUE"}, false, false},
		{"exporter none", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}, false, false},
		{"http/protobuf", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, true, false},
		{"traces protocol wins", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, true, false},
		{"grpc refused", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, false, true},
		{"other exporter refused", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, false, true},
		{"protocol without endpoint ignored", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := Enabled(func(k string) string { return tc.env[k] })
			if got != tc.want || (err != nil) != tc.err {
				t.Fatalf("Enabled = %v, %v; want %v, error %v", got, err, tc.want, tc.err)
			}
			if tc.err && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("error %v does not wrap ErrUnsupported", err)
			}
		})
	}
}

// TestFromEnvOff: without the variables no provider is built.
func TestFromEnvOff(t *testing.T) {
	t.Parallel()
	tp, err := FromEnv(t.Context(), func(string) string { return "" })
	if tp != nil || err != nil {
		t.Fatalf("FromEnv = %v, %v; want nil, nil", tp, err)
	}
}
