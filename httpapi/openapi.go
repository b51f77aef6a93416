package httpapi

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"

	"go.yaml.in/yaml/v2"
)

// openAPIYAML is the OpenAPI 3.1 description of every route, written by hand
// beside the handlers; a test checks that it and the routes agree both ways.
//
//go:embed openapi.yaml
var openAPIYAML []byte

// OpenAPIDocument returns the API description as JSON.
func OpenAPIDocument() ([]byte, error) {
	var doc any
	if err := yaml.Unmarshal(openAPIYAML, &doc); err != nil {
		return nil, fmt.Errorf("httpapi: openapi.yaml: %w", err)
	}
	j, err := toJSONValue(doc)
	if err != nil {
		return nil, fmt.Errorf("httpapi: openapi.yaml: %w", err)
	}
	return json.Marshal(j)
}

// toJSONValue turns what the YAML decoder gives (maps keyed by any) into
// values encoding/json can write: JSON object keys are strings.
func toJSONValue(v any) (any, error) {
	switch v := v.(type) {
	case map[any]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			ks, ok := k.(string)
			if !ok {
				return nil, fmt.Errorf("a map key %v that is not a string", k)
			}
			c, err := toJSONValue(e)
			if err != nil {
				return nil, err
			}
			m[ks] = c
		}
		return m, nil
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			c, err := toJSONValue(e)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	default:
		return v, nil
	}
}

// openAPIHandler serves the document converted once, when the server is built.
func openAPIHandler(doc []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", fmt.Sprint(len(doc)))
		_, _ = w.Write(doc)
	}
}
