package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// searchParamPrefix starts a query parameter that filters by a search
// attribute: search.NAME=VALUE.
const searchParamPrefix = "search."

// listFilters reads the search attribute and time filters of GET
// /v1/workflows into p: search.NAME=VALUE (one per name; several are
// ANDed), created_after, created_before and updated_before (RFC 3339).
// A bad name, a name given twice or a time that does not parse is a 400
// naming the parameter.
func listFilters(q url.Values, p *store.ListParams) error {
	search, err := searchParams(q)
	if err != nil {
		return err
	}
	p.Search = search
	for _, f := range []struct {
		name string
		dst  *time.Time
	}{{"created_after", &p.CreatedAfter}, {"created_before", &p.CreatedBefore}, {"updated_before", &p.UpdatedBefore}} {
		if !q.Has(f.name) {
			continue
		}
		v := q.Get(f.name)
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return httpError(http.StatusBadRequest, fmt.Sprintf("%s must be a time in RFC 3339 (e.g. 2026-05-17T10:00:00Z), not %q", f.name, v))
		}
		*f.dst = t
	}
	return nil
}

// searchParams reads the search.NAME=VALUE parameters of q (nil when there
// are none); a bad name or a name given twice is a 400 naming the
// parameter.
func searchParams(q url.Values) (map[string]string, error) {
	var search map[string]string
	for key, vals := range q {
		name, ok := strings.CutPrefix(key, searchParamPrefix)
		if !ok {
			continue
		}
		if err := workflow.ValidateSearchName(name); err != nil {
			return nil, httpError(http.StatusBadRequest, fmt.Sprintf("%s: %v", key, err))
		}
		if len(vals) > 1 {
			return nil, httpError(http.StatusBadRequest, fmt.Sprintf("%s is given %d times: one value per attribute (several attributes are ANDed)", key, len(vals)))
		}
		if search == nil {
			search = map[string]string{}
		}
		search[name] = vals[0]
	}
	return search, nil
}
