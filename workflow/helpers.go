package workflow

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
)

// truncate shortens a value quoted in an error message.
func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

func isNull(b json.RawMessage) bool { return string(bytes.TrimSpace(b)) == "null" }

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
