package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/httpapi"
	"github.com/flowd/flowd/internal/pgtest"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/store/postgres"
	"github.com/flowd/flowd/store/sqlite"
)

// TestWorkersOfEveryServer: two servers, each with its engine and in-process
// handlers, share one database as the nodes of a cluster do. Each one's
// GET /v1/workers lists both in-process pools and the remote workers that
// polled either server, with the node that served them.
func TestWorkersOfEveryServer(t *testing.T) {
	for _, b := range []struct {
		name string
		addr func(t *testing.T) string
		open func(t *testing.T, addr string) store.Backend
	}{
		{"sqlite", func(t *testing.T) string { return "sqlite:" + t.TempDir() + "/flowd.db" },
			func(t *testing.T, addr string) store.Backend {
				st, err := sqlite.Open(context.Background(), addr, sqlite.Options{})
				if err != nil {
					t.Fatal(err)
				}
				return st
			}},
		{"postgres", func(t *testing.T) string { return pgtest.NewDatabase(t) },
			func(t *testing.T, addr string) store.Backend {
				st, err := postgres.Open(context.Background(), addr, postgres.Options{})
				if err != nil {
					t.Fatal(err)
				}
				return st
			}},
	} {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			addr := b.addr(t)
			var clients []*httpapi.Client
			for _, node := range []string{"node-a", "node-b"} {
				st := b.open(t, addr)
				t.Cleanup(func() { st.Close() })
				if _, err := st.Migrate(t.Context()); err != nil {
					t.Fatal(err)
				}
				workers := 1
				eng, err := engine.New(engine.Config{Store: st, Workers: &workers, NodeID: node})
				if err != nil {
					t.Fatal(err)
				}
				eng.Register("greet", func(_ context.Context, t engine.Task) (json.RawMessage, error) { return t.Input, nil })
				if err := eng.Start(t.Context()); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(eng.Stop)
				handler, err := httpapi.NewServer(httpapi.Config{Store: st, Engine: eng})
				if err != nil {
					t.Fatal(err)
				}
				srv := httptest.NewServer(handler)
				t.Cleanup(srv.Close)
				clients = append(clients, httpapi.NewClient(srv.URL))
			}
			for i, worker := range []string{"remote-a", "remote-b"} {
				if task, err := clients[i].PollTask(t.Context(), httpapi.PollRequest{Worker: worker, Handlers: []string{"resize"}}); err != nil || task != nil {
					t.Fatalf("poll as %s: %v, %v", worker, task, err)
				}
			}
			want := []string{"node-a greet @node-a", "node-b greet @node-b", "remote-a resize @node-a", "remote-b resize @node-b"}
			for i, c := range clients {
				var got []string
				for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
					ws, err := c.ListWorkers(t.Context())
					if err != nil {
						t.Fatal(err)
					}
					got = got[:0]
					for _, w := range ws {
						got = append(got, w.Worker+" "+strings.Join(w.Handlers, ",")+" @"+w.Node)
					}
					slices.Sort(got)
					if slices.Equal(got, want) || time.Now().After(deadline) {
						break
					}
				}
				if !slices.Equal(got, want) {
					t.Errorf("server %d lists %q, want %q", i, got, want)
				}
			}
		})
	}
}

// TestClientListByIDPrefix: ListOptions.IDPrefix reaches the server as
// id_prefix, and an invalid prefix comes back as a 400.
func TestClientListByIDPrefix(t *testing.T) {
	st := backends[0].open(t)
	t.Cleanup(func() { st.Close() })
	if _, err := st.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	handler, err := httpapi.NewServer(httpapi.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	c := httpapi.NewClient(srv.URL)
	for _, id := range []string{"ab_1", "abx1", "ab_2"} {
		if _, err := c.CreateWorkflow(t.Context(), httpapi.CreateWorkflowRequest{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	page, err := c.ListWorkflows(t.Context(), httpapi.ListOptions{IDPrefix: "ab_", Limit: 1})
	if err != nil || len(page.Workflows) != 1 || page.Workflows[0].ID != "ab_2" || page.NextCursor == "" {
		t.Fatalf("ListWorkflows(id prefix ab_, limit 1) = %+v, %v; want ab_2 and a next page", page, err)
	}
	page, err = c.ListWorkflows(t.Context(), httpapi.ListOptions{IDPrefix: "ab_", Limit: 1, Cursor: page.NextCursor})
	if err != nil || len(page.Workflows) != 1 || page.Workflows[0].ID != "ab_1" || page.NextCursor != "" {
		t.Fatalf("ListWorkflows(id prefix ab_, page 2) = %+v, %v; want ab_1 and no next page", page, err)
	}
	_, err = c.ListWorkflows(t.Context(), httpapi.ListOptions{IDPrefix: "a b"})
	if httpapi.StatusCode(err) != 400 || !strings.Contains(err.Error(), `id prefix "a b" has character ' '`) {
		t.Errorf("ListWorkflows(id prefix \"a b\") = %v, want 400 naming the character", err)
	}
}
