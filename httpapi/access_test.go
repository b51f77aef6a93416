package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/flowd/flowd/httpapi"
)

// Who may use each route, stated here apart from the server's own table
// (routeAccess), so that a change of either shows. Admin may use every
// route; public routes need no token.
var (
	onlyAdmin = []httpapi.Role{httpapi.RoleAdmin}
	operators = []httpapi.Role{httpapi.RoleAdmin, httpapi.RoleOperator}
	readers   = []httpapi.Role{httpapi.RoleAdmin, httpapi.RoleOperator, httpapi.RoleReader}
	workers   = []httpapi.Role{httpapi.RoleAdmin, httpapi.RoleWorker}
	everyone  = []httpapi.Role{httpapi.RoleAdmin, httpapi.RoleOperator, httpapi.RoleWorker, httpapi.RoleReader}
	public    = []httpapi.Role(nil)
)

var wantAccess = map[string][]httpapi.Role{
	"POST /v1/workflows":                            operators,
	"GET /v1/workflows":                             readers,
	"GET /v1/workflows/{id}":                        readers,
	"PATCH /v1/workflows/{id}":                      operators,
	"DELETE /v1/workflows/{id}":                     operators,
	"POST /v1/workflows/{id}/status":                operators,
	"POST /v1/workflows/{id}/cancel":                operators,
	"POST /v1/workflows/{id}/pause":                 operators,
	"POST /v1/workflows/{id}/resume":                operators,
	"POST /v1/workflows/{id}/retry":                 operators,
	"POST /v1/workflows/{id}/steps/{step}/complete": operators,
	"POST /v1/workflows/{id}/rerun":                 operators,
	"GET /v1/workflows/{id}/history":                readers,
	"POST /v1/batch/status":                         operators,
	"POST /v1/events":                               operators,
	"PUT /v1/definitions/{name}":                    onlyAdmin,
	"GET /v1/definitions":                           everyone,
	"GET /v1/definitions/{name}":                    everyone,
	"DELETE /v1/definitions/{name}":                 onlyAdmin,
	"POST /v1/tasks/poll":                           workers,
	"POST /v1/tasks/{task_id}/complete":             workers,
	"POST /v1/tasks/{task_id}/fail":                 workers,
	"POST /v1/tasks/{task_id}/heartbeat":            workers,
	"POST /v1/tasks/{task_id}/steps/{name}":         workers,
	"POST /v1/tasks/{task_id}/suspend":              workers,
	"POST /v1/tasks/{task_id}/variables/{key}":      workers,
	"POST /v1/tasks/{task_id}/search/{name}":        workers,
	"GET /v1/workers":                               readers,
	"PUT /v1/schedules/{name}":                      operators,
	"GET /v1/schedules":                             readers,
	"GET /v1/schedules/{name}":                      readers,
	"DELETE /v1/schedules/{name}":                   operators,
	"POST /v1/schedules/{name}/pause":               operators,
	"POST /v1/schedules/{name}/resume":              operators,
	"POST /v1/schedules/{name}/trigger":             operators,
	"POST /v1/schedules/{name}/backfill":            operators,
	"POST /v1/bulk":                                 operators,
	"GET /v1/bulk":                                  readers,
	"GET /v1/bulk/count":                            readers,
	"GET /v1/bulk/{id}":                             readers,
	"POST /v1/bulk/{id}/cancel":                     operators,
	"GET /v1/openapi.json":                          everyone,
	"GET /healthz":                                  public,
	"GET /metrics":                                  public,
}

// roleTokens are the token file lines of the tests' servers: one token of
// each role.
var roleTokens = map[httpapi.Role]string{
	httpapi.RoleAdmin:    "tok-admin admin root",
	httpapi.RoleOperator: "tok-operator operator ops",
	httpapi.RoleWorker:   "tok-worker worker billing-worker",
	httpapi.RoleReader:   "tok-reader reader auditor",
}

func roleServer(t *testing.T, metricsTokenRequired bool) http.Handler {
	t.Helper()
	st := backends[0].open(t)
	t.Cleanup(func() { st.Close() })
	if _, err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range roleTokens {
		lines = append(lines, l)
	}
	tokens, err := httpapi.ParseTokens(strings.Join(lines, "\n"))
	if err != nil {
		t.Fatal(err)
	}
	h, err := httpapi.NewServer(httpapi.Config{Store: st, Tokens: tokens, MetricsTokenRequired: metricsTokenRequired})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

var pathParam = regexp.MustCompile(`\{[a-z_]+\}`)

// callAs makes the request of operation op ("METHOD /path/{param}") with
// token (none when ""): a body that refuses nothing before the route's
// handler, a poll that does not wait.
func callAs(h http.Handler, op, token string) *httptest.ResponseRecorder {
	method, path, _ := strings.Cut(op, " ")
	path = pathParam.ReplaceAllString(path, "x")
	var body string
	if method != "GET" && method != "DELETE" {
		body = "{}"
		if path == "/v1/tasks/poll" {
			body = `{"worker": "w", "handlers": ["h"], "wait_seconds": 0}`
		}
	}
	req := httptest.NewRequest(method, "http://localhost"+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// Every route of the API description, under each role: the roles it
// allows get past authorization (no 401 or 403), the others a 403 whose
// JSON body names the roles needed; without a token a 401, but on the
// public routes. A route of the description that the table above does not
// list fails the test.
func TestEveryRouteUnderEveryRole(t *testing.T) {
	t.Parallel()
	h := roleServer(t, false)
	ops := documentedOperations(t)
	if len(ops) < 30 {
		t.Fatalf("only %d operations in the description", len(ops))
	}
	for _, op := range ops {
		allowed, ok := wantAccess[op]
		if !ok {
			t.Errorf("%s: no access rule in this test; decide who may use it (httpapi routeAccess) and add it here", op)
			continue
		}
		for role, line := range roleTokens {
			token, _, _ := strings.Cut(line, " ")
			rec := callAs(h, op, token)
			switch {
			case allowed == nil || slices.Contains(allowed, role):
				if rec.Code == http.StatusUnauthorized || rec.Code == http.StatusForbidden {
					t.Errorf("%s as %s: %d %s; want it allowed", op, role, rec.Code, rec.Body)
				}
			default:
				var body httpapi.ErrorBody
				if rec.Code != http.StatusForbidden || json.Unmarshal(rec.Body.Bytes(), &body) != nil || body.Error != "Forbidden" {
					t.Errorf("%s as %s: %d %s; want a JSON 403", op, role, rec.Code, rec.Body)
					continue
				}
				if want := needs(allowed); !strings.Contains(body.Message, want) || !strings.Contains(body.Message, "role "+string(role)) {
					t.Errorf("%s as %s: 403 %q; want it to name the role and say it %s", op, role, body.Message, want)
				}
			}
		}
		rec := callAs(h, op, "")
		if allowed == nil && rec.Code == http.StatusUnauthorized || allowed != nil && rec.Code != http.StatusUnauthorized {
			t.Errorf("%s without a token: %d %s", op, rec.Code, rec.Body)
		}
	}
	// A route that does not exist: any valid token learns so; without one, 401.
	if rec := callAs(h, "GET /v1/nowhere", "tok-reader"); rec.Code != http.StatusNotFound {
		t.Errorf("an unknown route as reader: %d %s, want 404", rec.Code, rec.Body)
	}
	if rec := callAs(h, "GET /v1/nowhere", ""); rec.Code != http.StatusUnauthorized {
		t.Errorf("an unknown route without a token: %d %s, want 401", rec.Code, rec.Body)
	}
}

// needs is how a 403 names the roles that may use a route.
func needs(allowed []httpapi.Role) string {
	names := make([]string, len(allowed))
	for i, r := range allowed {
		names[i] = string(r)
	}
	if len(names) == 1 {
		return "needs the role " + names[0]
	}
	return "needs one of the roles " + strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// --metrics-token-required: /metrics needs a token, of any role.
func TestMetricsTokenRequired(t *testing.T) {
	t.Parallel()
	h := roleServer(t, true)
	if rec := callAs(h, "GET /metrics", ""); rec.Code != http.StatusUnauthorized {
		t.Errorf("/metrics without a token: %d, want 401", rec.Code)
	}
	if rec := callAs(h, "GET /metrics", "not-a-token"); rec.Code != http.StatusUnauthorized {
		t.Errorf("/metrics with a wrong token: %d, want 401", rec.Code)
	}
	for role, line := range roleTokens {
		token, _, _ := strings.Cut(line, " ")
		if rec := callAs(h, "GET /metrics", token); rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/plain") {
			t.Errorf("/metrics as %s: %d, want 200 and the metrics", role, rec.Code)
		}
	}
	if rec := callAs(h, "GET /healthz", ""); rec.Code != http.StatusOK {
		t.Errorf("/healthz without a token: %d, want 200 (it stays public)", rec.Code)
	}
	// Without tokens the flag would shut everyone out: refused.
	st := backends[0].open(t)
	t.Cleanup(func() { st.Close() })
	if _, err := httpapi.NewServer(httpapi.Config{Store: st, MetricsTokenRequired: true}); err == nil || !strings.Contains(err.Error(), "MetricsTokenRequired without Tokens") {
		t.Errorf("MetricsTokenRequired without tokens: %v", err)
	}
}
