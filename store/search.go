package store

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/flowd/flowd/workflow/instance"
)

// SearchRows are the rows that store attrs (validated by CreateParams and
// Write), sorted by name; nil for none.
func SearchRows(attrs map[string]json.RawMessage) []instance.SearchValue {
	rows, err := instance.CheckSearch(attrs)
	if err != nil {
		return nil // checked before: Normalize, Prepare
	}
	return rows
}

// SearchFilter is one equality of ListParams.Search.
type SearchFilter struct{ Name, Value string }

// SearchFilters are p.Search in name order: a query built from them is the
// same text for the same names.
func (p *ListParams) SearchFilters() []SearchFilter {
	out := make([]SearchFilter, 0, len(p.Search))
	for _, name := range slices.Sorted(maps.Keys(p.Search)) {
		out = append(out, SearchFilter{name, p.Search[name]})
	}
	return out
}

// normalizeSearchAndTimes checks the search filters and rounds the times
// to the stored precision (microseconds) so that each comparison keeps its
// exact meaning: a stored time is after t exactly when it is after t
// truncated, and before t exactly when it is before t rounded up.
func (p *ListParams) normalizeSearchAndTimes() error {
	if len(p.Search) > instance.MaxSearchAttributes {
		return fmt.Errorf("%w: %d search filters, at most %d", ErrInvalidArgument, len(p.Search), instance.MaxSearchAttributes)
	}
	for name, v := range p.Search {
		if err := instance.ValidateSearchName(name); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
		}
		if len(v) > instance.MaxSearchValueBytes {
			return fmt.Errorf("%w: search value of %s is %d bytes long, at most %d", ErrInvalidArgument, name, len(v), instance.MaxSearchValueBytes)
		}
	}
	if !p.CreatedAfter.IsZero() {
		p.CreatedAfter = Timestamp(p.CreatedAfter)
	}
	p.CreatedBefore = ceilTimestamp(p.CreatedBefore)
	p.UpdatedBefore = ceilTimestamp(p.UpdatedBefore)
	return nil
}

// ceilTimestamp is Timestamp rounded up to the microsecond; zero stays
// zero.
func ceilTimestamp(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	ts := Timestamp(t)
	if ts.Before(t) {
		ts = ts.Add(time.Microsecond)
	}
	return ts
}

// SearchOf is the Instance.Search of stored rows: nil for none.
func SearchOf(rows []instance.SearchValue) map[string]json.RawMessage {
	if len(rows) == 0 {
		return nil
	}
	out := make(map[string]json.RawMessage, len(rows))
	for _, r := range rows {
		out[r.Name] = instance.SearchJSON(r.Text, r.Kind)
	}
	return out
}

// CheckNoSearch refuses writes that set search attributes where only
// Apply may (ApplyGroup, ApplyEach): ErrInvalidArgument.
func CheckNoSearch(writes []*Write) error {
	for _, w := range writes {
		if w != nil && len(w.Search) > 0 {
			return fmt.Errorf("%w: workflow %q: search attributes are set by Apply alone", ErrInvalidArgument, w.ID)
		}
	}
	return nil
}

// CheckSearchCount is the error of a write that leaves an instance with n
// search attributes: nil while n is at most instance.MaxSearchAttributes.
func CheckSearchCount(id string, n int) error {
	if n > instance.MaxSearchAttributes {
		return fmt.Errorf("%w: workflow %q would have %d search attributes, at most %d", ErrInvalidArgument, id, n, instance.MaxSearchAttributes)
	}
	return nil
}
