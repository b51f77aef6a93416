package web_test

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/flowd/flowd/httpapi"
	"github.com/flowd/flowd/store/sqlite"
	"github.com/flowd/flowd/web"
)

func get(t *testing.T, url string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(b)
}

func TestHandlerServesPageAndAssets(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", web.Handler())
	mux.Handle("GET "+web.AssetPrefix, web.Handler())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	res, body := get(t, srv.URL+"/")
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET / = %d %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "connect-src 'self'") {
		t.Errorf("Content-Security-Policy = %q", csp)
	}
	if !strings.Contains(body, `src="ui/app.js"`) {
		t.Errorf("index.html does not load ui/app.js")
	}

	for path, ctype := range map[string]string{
		"/ui/app.js":      "text/javascript",
		"/ui/style.css":   "text/css",
		"/ui/favicon.svg": "image/svg+xml",
	} {
		res, _ := get(t, srv.URL+path)
		if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), ctype) {
			t.Errorf("GET %s = %d %q, want 200 %s", path, res.StatusCode, res.Header.Get("Content-Type"), ctype)
		}
		etag := res.Header.Get("ETag")
		if etag == "" {
			t.Errorf("GET %s has no ETag", path)
			continue
		}
		if res, _ := get(t, srv.URL+path, "If-None-Match", etag); res.StatusCode != http.StatusNotModified {
			t.Errorf("GET %s with If-None-Match: %s = %d, want 304", path, etag, res.StatusCode)
		}
	}
	for _, path := range []string{"/ui/nope.js", "/ui/", "/ui/index.html", "/ui/../web.go"} {
		if res, _ := get(t, srv.URL+path); res.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", path, res.StatusCode)
		}
	}
}

// TestEveryReferencedAssetExists catches a typo in a file name: every file
// index.html links and every module a script imports must be embedded.
func TestEveryReferencedAssetExists(t *testing.T) {
	t.Parallel()
	files := map[string]bool{}
	err := filepath.WalkDir("static", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files[strings.TrimPrefix(filepath.ToSlash(p), "static/")] = true
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	refs := regexp.MustCompile(`(?:href|src)="ui/([^"]+)"|from '\./([^']+)'|import\('\./([^']+)'\)`)
	for name := range files {
		b, err := os.ReadFile(filepath.Join("static", name))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range refs.FindAllStringSubmatch(string(b), -1) {
			ref := m[1] + m[2] + m[3]
			if !files[ref] {
				t.Errorf("%s refers to %q, which is not in web/static", name, ref)
			}
		}
	}
}

// TestServerRoutes checks the wiring in httpapi: the page at "/", its assets,
// and that the API's own answers did not change around them.
func TestServerRoutes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, "sqlite:"+t.TempDir()+"/f.db", sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	api, err := httpapi.NewServer(httpapi.Config{Store: st, Tokens: httpapi.AdminTokens("t0ken")})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)

	for _, tc := range []struct {
		path, ctype string
		status      int
	}{
		{"/", "text/html", http.StatusOK}, // no token needed for the page: it asks for one
		{"/ui/app.js", "text/javascript", http.StatusOK},
		{"/ui/reference.js", "text/javascript", http.StatusOK}, // the API page's renderer
		{"/v1/openapi.json", "application/json", http.StatusUnauthorized},
		{"/v1/workflows", "application/json", http.StatusUnauthorized},
		{"/nope", "application/json", http.StatusNotFound},
		{"/v1/nope", "application/json", http.StatusUnauthorized},
		{"/healthz", "application/json", http.StatusOK},
	} {
		res, _ := get(t, srv.URL+tc.path)
		if res.StatusCode != tc.status || !strings.HasPrefix(res.Header.Get("Content-Type"), tc.ctype) {
			t.Errorf("GET %s = %d %q, want %d %s", tc.path, res.StatusCode, res.Header.Get("Content-Type"), tc.status, tc.ctype)
		}
	}
	if res, _ := get(t, srv.URL+"/v1/nope", "Authorization", "Bearer t0ken"); res.StatusCode != http.StatusNotFound ||
		!strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		t.Errorf("GET /v1/nope with a token = %d %q, want the API's JSON 404", res.StatusCode, res.Header.Get("Content-Type"))
	}
	if res, body := get(t, srv.URL+"/v1/openapi.json", "Authorization", "Bearer t0ken"); res.StatusCode != http.StatusOK ||
		!strings.Contains(body, `"openapi":"3.1.0"`) {
		t.Errorf("GET /v1/openapi.json with a token = %d %.80q, want the OpenAPI document the API page renders", res.StatusCode, body)
	}
}
