package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/web"
)

// Role is what a bearer token may do.
type Role string

// The roles. Admin may use every route; each other role the routes
// routeAccess gives it.
const (
	// RoleAdmin may do everything.
	RoleAdmin Role = "admin"
	// RoleOperator may start, act on, patch and delete workflows, manage
	// schedules, publish events, and read everything.
	RoleOperator Role = "operator"
	// RoleWorker may poll for tasks and complete, fail and heartbeat
	// them, and read definitions.
	RoleWorker Role = "worker"
	// RoleReader may read (GET) everything and change nothing.
	RoleReader Role = "reader"
)

// Roles are the roles, in the order the documentation lists them.
var Roles = []Role{RoleAdmin, RoleOperator, RoleWorker, RoleReader}

// Token is a bearer token the API accepts: its secret, its role, and its
// name, the actor its requests' writes record in the history.
type Token struct {
	Secret string
	Role   Role
	Name   string
}

// access is who may use a route: anyone (public, without a token) or a
// token of admin or of one of roles.
type access struct {
	public bool
	roles  []Role
}

// The kinds of access the routes have.
var (
	publicAccess   = access{public: true}
	adminAccess    = access{}
	operateAccess  = access{roles: []Role{RoleOperator}}
	readAccess     = access{roles: []Role{RoleOperator, RoleReader}}
	workAccess     = access{roles: []Role{RoleWorker}}
	everyoneAccess = access{roles: []Role{RoleOperator, RoleWorker, RoleReader}}
)

// routeAccess is who may use each route, by its mux pattern: the one place
// this is decided. A route missing here is open to admin tokens only (and
// a test requires every route to be listed). /metrics is public unless
// Config.MetricsTokenRequired (see Server.accessOf).
var routeAccess = map[string]access{
	"POST /v1/workflows":                            operateAccess,
	"GET /v1/workflows":                             readAccess,
	"GET /v1/workflows/{id}":                        readAccess,
	"PATCH /v1/workflows/{id}":                      operateAccess,
	"DELETE /v1/workflows/{id}":                     operateAccess,
	"POST /v1/workflows/{id}/status":                operateAccess,
	"POST /v1/workflows/{id}/cancel":                operateAccess,
	"POST /v1/workflows/{id}/pause":                 operateAccess,
	"POST /v1/workflows/{id}/resume":                operateAccess,
	"POST /v1/workflows/{id}/retry":                 operateAccess,
	"POST /v1/workflows/{id}/steps/{step}/complete": operateAccess,
	"POST /v1/workflows/{id}/rerun":                 operateAccess,
	"GET /v1/workflows/{id}/history":                readAccess,
	"POST /v1/batch/status":                         operateAccess,
	// A bulk operation acts on workflows as an operator may; counting
	// what a filter matches only reads.
	"POST /v1/bulk":             operateAccess,
	"GET /v1/bulk":              readAccess,
	"GET /v1/bulk/count":        readAccess,
	"GET /v1/bulk/{id}":         readAccess,
	"POST /v1/bulk/{id}/cancel": operateAccess,
	"POST /v1/events":           operateAccess,
	// A definition is a program the server runs, with server-side calls:
	// only admin stores or deletes one.
	"PUT /v1/definitions/{name}":    adminAccess,
	"DELETE /v1/definitions/{name}": adminAccess,
	"GET /v1/definitions":           everyoneAccess,
	"GET /v1/definitions/{name}":    everyoneAccess,
	// A worker's lease is its proof that a task is its own.
	"POST /v1/tasks/poll":                      workAccess,
	"POST /v1/tasks/{task_id}/complete":        workAccess,
	"POST /v1/tasks/{task_id}/fail":            workAccess,
	"POST /v1/tasks/{task_id}/heartbeat":       workAccess,
	"POST /v1/tasks/{task_id}/steps/{name}":    workAccess,
	"POST /v1/tasks/{task_id}/suspend":         workAccess,
	"POST /v1/tasks/{task_id}/variables/{key}": workAccess,
	"POST /v1/tasks/{task_id}/search/{name}":   workAccess,
	"GET /v1/workers":                          readAccess,
	// A schedule starts workflows: as an operator may.
	"PUT /v1/schedules/{name}":           operateAccess,
	"GET /v1/schedules":                  readAccess,
	"GET /v1/schedules/{name}":           readAccess,
	"DELETE /v1/schedules/{name}":        operateAccess,
	"POST /v1/schedules/{name}/pause":    operateAccess,
	"POST /v1/schedules/{name}/resume":   operateAccess,
	"POST /v1/schedules/{name}/trigger":  operateAccess,
	"POST /v1/schedules/{name}/backfill": operateAccess,
	"GET /v1/openapi.json":               everyoneAccess,
	"GET /healthz":                       publicAccess,
	"GET /metrics":                       publicAccess,
	// The dashboard's page and assets: the page asks for a token and
	// reaches the API with it.
	"GET /{$}":               publicAccess,
	"GET " + web.AssetPrefix: publicAccess,
}

// accessOf is who may use the route of pattern ("" for a request no route
// matches: any token, which then gets the 404 or 405).
func (s *Server) accessOf(pattern string) access {
	if pattern == "" {
		return everyoneAccess
	}
	if pattern == "GET /metrics" && s.cfg.MetricsTokenRequired {
		return everyoneAccess
	}
	if a, ok := routeAccess[pattern]; ok {
		return a
	}
	return adminAccess
}

// allows reports whether a token of role may use the route.
func (a access) allows(role Role) bool {
	return a.public || role == RoleAdmin || slices.Contains(a.roles, role)
}

// needs names the roles that may use the route, for a 403.
func (a access) needs() string {
	roles := append([]string{string(RoleAdmin)}, rolesText(a.roles)...)
	if len(roles) == 1 {
		return "the role " + roles[0]
	}
	return "one of the roles " + strings.Join(roles[:len(roles)-1], ", ") + " or " + roles[len(roles)-1]
}

func rolesText(roles []Role) []string {
	out := make([]string, len(roles))
	for i, r := range roles {
		out[i] = string(r)
	}
	return out
}

// withAuth, when tokens are configured, requires on every /v1 route (and
// on /metrics with MetricsTokenRequired) a bearer token whose role may use
// the route: 401 without a valid token, 403 with one whose role may not.
// The request's context then carries the token's name as the actor of the
// writes it makes; without tokens it is store.ActorAnonymous.
func (s *Server) withAuth(mux *http.ServeMux, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(s.tokens) == 0 {
			next.ServeHTTP(w, r.WithContext(store.WithActor(r.Context(), store.ActorAnonymous)))
			return
		}
		_, pattern := mux.Handler(r)
		acc := s.accessOf(pattern)
		if acc.public || pattern == "" && !strings.HasPrefix(r.URL.Path, "/v1/") && r.URL.Path != "/v1" {
			next.ServeHTTP(w, r)
			return
		}
		tok, ok := s.token(r.Header.Get("Authorization"))
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="flowd"`)
			writeErrorStatus(w, http.StatusUnauthorized, "a valid bearer token is required (Authorization: Bearer <token>)")
			return
		}
		if !acc.allows(tok.Role) {
			writeErrorStatus(w, http.StatusForbidden, fmt.Sprintf("the token %q has the role %s, which may not use %s: it needs %s",
				tok.Name, tok.Role, pattern, acc.needs()))
			return
		}
		next.ServeHTTP(w, r.WithContext(store.WithActor(r.Context(), tok.Name)))
	})
}

// token returns the configured token the Authorization header carries. It
// compares against every token in constant time, without stopping at the
// first match, so timing reveals neither a token nor its position.
func (s *Server) token(header string) (Token, bool) {
	scheme, tok, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return Token{}, false
	}
	got := []byte(strings.TrimSpace(tok))
	found := -1
	for i, t := range s.tokens {
		eq := subtle.ConstantTimeCompare(got, t.secret)
		found = subtle.ConstantTimeSelect(eq, i, found)
	}
	if found < 0 {
		return Token{}, false
	}
	return s.tokens[found].Token, true
}

// configuredToken is a Token with its secret as the bytes compared.
type configuredToken struct {
	Token
	secret []byte
}

// DefaultTokenName is the name of a token the token file gives none: its
// role and the start of its secret's SHA-256, which tells tokens apart in
// the history without showing them.
func DefaultTokenName(secret string, role Role) string {
	sum := sha256.Sum256([]byte(secret))
	return string(role) + "-" + hex.EncodeToString(sum[:4])
}

// AdminTokens are admin tokens with these secrets and their default names.
func AdminTokens(secrets ...string) []Token {
	out := make([]Token, len(secrets))
	for i, s := range secrets {
		out[i] = Token{Secret: s, Role: RoleAdmin, Name: DefaultTokenName(s, RoleAdmin)}
	}
	return out
}
