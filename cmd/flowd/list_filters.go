package main

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/flowd/flowd/client"
	"github.com/flowd/flowd/workflow"
)

// listFilters are the flags of `flowd list` that filter by search
// attributes and time: --where NAME=VALUE (repeatable, ANDed), --since and
// --until (a duration before now, or an RFC 3339 time) for the creation
// time, and --updated-before.
type listFilters struct {
	where                       []string
	since, until, updatedBefore string
	search                      map[string]string
	createdAfter, createdBefore time.Time
	updatedBeforeTime           time.Time
}

func (f *listFilters) bind(cmd *cobra.Command) {
	cmd.Flags().StringArrayVar(&f.where, "where", nil, "only instances whose search attribute NAME has VALUE: NAME=VALUE (repeatable; ANDed)")
	cmd.Flags().StringVar(&f.since, "since", "", "only instances created after this: a duration before now (1h, 30m, 7d) or an RFC 3339 time")
	cmd.Flags().StringVar(&f.until, "until", "", "only instances created before this: a duration before now or an RFC 3339 time")
	cmd.Flags().StringVar(&f.updatedBefore, "updated-before", "", "only instances last written before this: a duration before now or an RFC 3339 time")
}

// apply checks the flags (a mistake is a usage error) and sets them on
// opts; now is the time durations count back from.
func (f *listFilters) apply(opts *client.ListOptions, now time.Time) error {
	for _, w := range f.where {
		name, value, ok := strings.Cut(w, "=")
		if !ok {
			return usageError("--where %q: want NAME=VALUE", w)
		}
		if err := workflow.ValidateSearchName(name); err != nil {
			return usageError("--where: %v", err)
		}
		if _, dup := f.search[name]; dup {
			return usageError("--where: %s is given twice: one value per attribute", name)
		}
		if f.search == nil {
			f.search = map[string]string{}
		}
		f.search[name] = value
	}
	opts.Search = f.search
	for _, t := range []struct {
		flag, v string
		dst     *time.Time
	}{{"--since", f.since, &opts.CreatedAfter}, {"--until", f.until, &opts.CreatedBefore}, {"--updated-before", f.updatedBefore, &opts.UpdatedBefore}} {
		if t.v == "" {
			continue
		}
		at, err := timeAgo(t.v, now)
		if err != nil {
			return usageError("%s %q: want a duration before now (90s, 1h, 7d) or an RFC 3339 time (2026-05-17T10:00:00Z)", t.flag, t.v)
		}
		*t.dst = at
	}
	f.createdAfter, f.createdBefore, f.updatedBeforeTime = opts.CreatedAfter, opts.CreatedBefore, opts.UpdatedBefore
	return nil
}

// timeAgo reads an RFC 3339 time, or a duration (Go's, or whole days: 7d)
// before now.
func timeAgo(v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	unit := time.Duration(1)
	if days, ok := strings.CutSuffix(v, "d"); ok {
		v, unit = days+"h", 24
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return time.Time{}, err
	}
	if d < 0 {
		return time.Time{}, errors.New("a negative duration")
	}
	return now.Add(-d * unit), nil
}

// nextArgs are the flags that repeat the filters in the command that
// prints the next page: the times as they were resolved, so the next page
// lists the same instances.
func (f *listFilters) nextArgs() []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(f.search)) {
		out = append(out, "--where", shellQuote(name+"="+f.search[name]))
	}
	for _, t := range []struct {
		flag string
		at   time.Time
	}{{"--since", f.createdAfter}, {"--until", f.createdBefore}, {"--updated-before", f.updatedBeforeTime}} {
		if !t.at.IsZero() {
			out = append(out, t.flag, t.at.UTC().Format(time.RFC3339Nano))
		}
	}
	return out
}
