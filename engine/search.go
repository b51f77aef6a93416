package engine

import (
	"encoding/json"
	"fmt"
	"maps"

	"github.com/flowd/flowd/store"
)

// searchOf is the search attributes of an instance of c started with
// input: the definition's, rendered (each to at most max bytes), with
// start's over those of the same name. What does not render to a string,
// a number or a boolean, like a bad name or value of start's, is the
// caller's mistake: ErrInvalidArgument.
func searchOf(c *compiled, input json.RawMessage, start map[string]json.RawMessage, max int) (map[string]json.RawMessage, error) {
	out, err := c.Search.Render(input, max)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", store.ErrInvalidArgument, err)
	}
	if len(start) > 0 {
		if out == nil {
			out = make(map[string]json.RawMessage, len(start))
		}
		maps.Copy(out, start)
	}
	return out, nil
}
