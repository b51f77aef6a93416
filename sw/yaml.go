// Reading a document: YAML or JSON into JSON values whose numbers keep the
// text they were written with.

package sw

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/flowd/flowd/workflow"
)

// documentJSON returns data, YAML or JSON, as JSON whose numbers keep the
// text they were written with (large integers stay exact).
func documentJSON(data []byte) ([]byte, error) { return workflow.DocumentJSON(data, "workflow") }

// decodeJSON decodes raw into JSON values with json.Number numbers; empty is
// null.
func decodeJSON(raw []byte) (any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data after the JSON value")
	}
	return v, nil
}

// encodeJSON is json.Marshal without HTML escaping, so "&" in a URL stays
// readable.
func encodeJSON(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
