package client_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/flowd/flowd/client"
)

// HistoryVersion reads one version; a version the instance does not have is
// a *VersionError naming its latest, an unknown instance a 404.
func TestClientHistoryVersion(t *testing.T) {
	t.Parallel()
	b := setupClient(t, nil)
	ctx := t.Context()
	b.create(t, "w", "")
	if _, err := b.c.PatchWorkflow(ctx, "w", `"0"`, json.RawMessage(`{"variables":{"x":1}}`)); err != nil {
		t.Fatal(err)
	}
	v, err := b.c.HistoryVersion(ctx, "w", 1)
	if err != nil || v.Version != 1 || string(v.State.Variables["x"]) != "1" {
		t.Fatalf("version 1: %+v, %v", v, err)
	}
	_, err = b.c.HistoryVersion(ctx, "w", 2)
	var ve *client.VersionError
	if !errors.Is(err, client.ErrNoSuchVersion) || !errors.As(err, &ve) || ve.Latest != 1 ||
		err.Error() != "workflow w has no version 2: its versions are 0 to 1" {
		t.Errorf("version 2: %v", err)
	}
	_, err = b.c.HistoryVersion(ctx, "missing", 0)
	wantStatus(t, err, 404)
	if _, err := b.c.HistoryVersion(ctx, "w", -1); err == nil || client.StatusCode(err) != 0 {
		t.Errorf("version -1: %v", err)
	}
}
