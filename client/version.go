package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/flowd/flowd/workflow/instance"
)

// ErrNoSuchVersion is matched (errors.Is) by the *VersionError of
// HistoryVersion.
var ErrNoSuchVersion = errors.New("no such version")

// VersionError says that an instance exists but has no version Version:
// its versions are 0 to Latest.
type VersionError struct {
	ID      string
	Version int64
	Latest  int64
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("workflow %s has no version %d: its versions are 0 to %d", e.ID, e.Version, e.Latest)
}

// Is makes errors.Is(err, ErrNoSuchVersion) true.
func (e *VersionError) Is(target error) bool { return target == ErrNoSuchVersion }

// HistoryVersion returns version v of the instance, as GET …/history
// shows it. Errors: 404 (*APIError) for an unknown instance, *VersionError
// for a version it does not have.
func (c *Client) HistoryVersion(ctx context.Context, id string, v int64) (*instance.HistoryEntry, error) {
	if v < 0 {
		return nil, fmt.Errorf("flowd client: HistoryVersion: a version is 0 or more, not %d", v)
	}
	page, err := c.HistoryPage(ctx, id, HistoryOptions{Since: v, Limit: 1})
	if err != nil {
		return nil, err
	}
	if len(page.Versions) == 1 && page.Versions[0].Version == v {
		return &page.Versions[0], nil
	}
	inst, err := c.GetWorkflow(ctx, id)
	if err != nil {
		return nil, err
	}
	return nil, &VersionError{ID: id, Version: v, Latest: inst.Version}
}
