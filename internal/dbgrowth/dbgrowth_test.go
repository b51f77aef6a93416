package dbgrowth_test

import (
	"crypto/rand"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowd/flowd/internal/dbgrowth"
	"github.com/flowd/flowd/internal/pgtest"
	"github.com/flowd/flowd/internal/storeopen"
	"github.com/flowd/flowd/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// Written grows with what the store writes, on both stores: the WAL
// position on PostgreSQL, the files' size on SQLite.
func TestWrittenGrowsWithWrites(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		url  func(t *testing.T) string
		wal  bool
	}{
		{"sqlite", func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "g.db") }, false},
		{"postgres", func(t *testing.T) string { return pgtest.NewDatabase(t) }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			url := c.url(t)
			s, err := storeopen.Open(ctx, url, storeopen.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, err := s.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			m, err := dbgrowth.Open(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if m.IsWAL() != c.wal {
				t.Errorf("IsWAL %v, want %v", m.IsWAL(), c.wal)
			}
			before, err := m.Written(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var text strings.Builder
			for text.Len() < 100_000 {
				text.WriteString(rand.Text()) // random: it does not compress
			}
			input := []byte(`"` + text.String() + `"`)
			for i := range 5 {
				if _, err := s.Create(ctx, store.CreateParams{ID: "g" + string(rune('a'+i)), Input: input}); err != nil {
					t.Fatal(err)
				}
			}
			after, err := m.Written(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if after-before < 500_000 {
				t.Errorf("Written went from %d to %d after 500 KB of inputs", before, after)
			}
		})
	}
}

func TestOpenRefusesWhatItCannotMeasure(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ url, msg string }{
		{"sqlite::memory:", "an in-memory SQLite database has no file"},
		{"mysql://user:secret@localhost/x", `unsupported database URL "mysql://user:xxxxx@localhost/x"`},
	} {
		_, err := dbgrowth.Open(t.Context(), c.url)
		if !errors.Is(err, dbgrowth.ErrNotMeasured) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("Open(%q): %v; want ErrNotMeasured saying %q", c.url, err, c.msg)
		}
	}
}
