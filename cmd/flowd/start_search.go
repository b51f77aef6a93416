package main

import (
	"encoding/json"
	"strings"

	"github.com/flowd/flowd/workflow"
)

// searchFlags reads start's --search NAME=VALUE flags into the request's
// search attributes. A VALUE that is a JSON number, boolean or string
// (42, true, "007") is that value; any other text is a string, so that
// --search customer=acme needs no quotes and --search 'zip="01234"' keeps
// the leading zero. A malformed flag is a usage error; the server checks
// the values (their length, how many).
func searchFlags(flags []string) (map[string]json.RawMessage, error) {
	if len(flags) == 0 {
		return nil, nil
	}
	out := make(map[string]json.RawMessage, len(flags))
	for _, f := range flags {
		name, value, ok := strings.Cut(f, "=")
		if !ok {
			return nil, usageError("--search %q: want NAME=VALUE", f)
		}
		if err := workflow.ValidateSearchName(name); err != nil {
			return nil, usageError("--search: %v", err)
		}
		if _, dup := out[name]; dup {
			return nil, usageError("--search: %s is given twice: one value per attribute", name)
		}
		out[name] = searchValue(value)
	}
	return out, nil
}

// searchValue is VALUE as searchFlags reads it.
func searchValue(v string) json.RawMessage {
	var scalar any
	if err := json.Unmarshal([]byte(v), &scalar); err == nil {
		switch scalar.(type) {
		case float64, bool, string:
			return json.RawMessage(v)
		}
	}
	b, _ := json.Marshal(v) // a string always encodes
	return b
}
