// Package web is the dashboard: plain HTML, CSS and JavaScript modules
// embedded in the binary with go:embed and served by Handler. There is no
// build step and nothing is fetched from outside, so it works offline.
//
// The page does everything through the public /v1 API with fetch, like any
// other client: this package must not import the store, the engine or the API
// handlers, and must not grow routes of its own beyond the static files.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"
)

// AssetPrefix is the path under which the dashboard's CSS and JavaScript are
// served; the page itself is served at "/". index.html refers to its assets
// relative to "/", so the dashboard also works behind a proxy on a sub-path.
const AssetPrefix = "/ui/"

//go:embed static
var static embed.FS

// contentSecurityPolicy allows only the page's own files and same-origin API
// calls: no inline script, no external anything.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

type asset struct {
	body        []byte
	contentType string
	etag        string
}

// loadAssets reads every embedded file once; the files never change while the
// process runs, so their ETags are content hashes computed here.
var loadAssets = sync.OnceValue(func() map[string]asset {
	assets := map[string]asset{}
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := static.ReadFile(p)
		if err != nil {
			return err
		}
		ctype := mime.TypeByExtension(path.Ext(p))
		if ctype == "" {
			ctype = http.DetectContentType(body)
		}
		sum := sha256.Sum256(body)
		assets[strings.TrimPrefix(p, "static/")] = asset{
			body:        body,
			contentType: ctype,
			etag:        `"` + hex.EncodeToString(sum[:8]) + `"`,
		}
		return nil
	})
	if err != nil {
		panic("web: reading the embedded dashboard: " + err.Error()) // cannot happen with a valid embed
	}
	return assets
})

// Handler serves the dashboard: index.html at "/" and the static files under
// AssetPrefix. Register it for exactly those paths ("GET /{$}" and
// "GET /ui/"), so unknown API paths still get the API's own 404.
func Handler() http.Handler {
	assets := loadAssets()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := "index.html"
		if r.URL.Path != "/" {
			rest, ok := strings.CutPrefix(r.URL.Path, AssetPrefix)
			if !ok || rest == "index.html" {
				http.NotFound(w, r)
				return
			}
			name = rest
		}
		a, ok := assets[name]
		if !ok {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", a.contentType)
		h.Set("ETag", a.etag)
		// Revalidate every time: the ETag makes that a 304, and a new binary
		// is picked up at once.
		h.Set("Cache-Control", "no-cache")
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(a.body))
	})
}
