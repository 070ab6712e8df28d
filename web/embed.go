// Package web serves agentry's web app: the assets `vite build` writes to dist/app, embedded in
// the binary. A binary built before the app (a fresh clone that only ran `go build`) serves a
// page saying how to build it.
package web

import (
	"bytes"
	"compress/gzip"
	"embed"
	"io/fs"
	"net/http"
	"path"
	"regexp"
	"strings"
	"sync"
	"time"
)

//go:embed dist
var dist embed.FS

// notBuilt is served at every app path when dist/app is missing.
const notBuilt = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>agentry</title></head>
<body style="font: 16px/1.5 system-ui, sans-serif; max-width: 40rem; margin: 4rem auto; padding: 0 1rem">
<h1>agentry</h1>
<p>The agentry API is running. GraphQL is served at <code>/graphql</code> (POST, GET for queries,
WebSocket with graphql-transport-ws, and SSE).</p>
<p>The web app is not built into this binary: run <code>make web</code> (or <code>make run</code>) and
build again.</p>
</body></html>
`

// Handler serves the built web app: files as they are, hashed assets (under /assets/) cached for a
// year, and index.html, never cached, for every other path that names no file (the app's own
// routes). Every answer carries a Content-Security-Policy that lets the page load and connect to
// its own origin only (its WebSocket included).
func Handler() http.Handler {
	app, err := fs.Sub(dist, "dist/app")
	if err != nil {
		panic(err) // a constant, valid path
	}
	return newHandler(app)
}

func newHandler(app fs.FS) http.Handler {
	index, err := fs.ReadFile(app, "index.html")
	if err != nil {
		index = []byte(notBuilt)
	}
	files := http.FileServerFS(app)
	var packed sync.Map // file name -> *compressed
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp(r))
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		name := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")
		if name != "" && name != "index.html" {
			if st, err := fs.Stat(app, name); err == nil && !st.IsDir() {
				if strings.HasPrefix(name, "assets/") {
					// Vite names these by content hash: a new build has new names.
					h.Set("Cache-Control", "public, max-age=31536000, immutable")
				} else {
					h.Set("Cache-Control", "no-cache")
				}
				if compressible(name) && acceptsGzip(r) {
					v, _ := packed.LoadOrStore(name, &compressed{})
					if body, ok := v.(*compressed).get(app, name); ok {
						h.Set("Content-Encoding", "gzip")
						h.Add("Vary", "Accept-Encoding")
						http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(body))
						return
					}
				}
				files.ServeHTTP(w, r)
				return
			}
			if strings.HasPrefix(name, "assets/") || path.Ext(name) != "" {
				// A missing file is 404, not the app: a stale page asking for an old chunk must fail loudly.
				h.Set("Cache-Control", "no-cache")
				http.NotFound(w, r)
				return
			}
		}
		h.Set("Cache-Control", "no-cache")
		h.Set("Content-Type", "text/html; charset=utf-8")
		http.ServeContent(w, r, "index.html", time.Time{}, bytes.NewReader(index))
	})
}

// csp allows scripts, styles, fonts, images and connections from the page's own origin, and
// connections to its WebSocket (ws or wss on the same host); images may also be data: and blob:
// URLs (previews of attachments). Nothing may frame the app.
func csp(r *http.Request) string {
	connect := "'self'"
	if hostPattern.MatchString(r.Host) {
		connect += " ws://" + r.Host
		if r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") {
			connect = "'self' wss://" + r.Host
		}
	}
	return "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; font-src 'self'; " +
		"connect-src " + connect + "; object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'"
}

// hostPattern is a Host header that may be named in the policy (a name or address and a port).
var hostPattern = regexp.MustCompile(`^[A-Za-z0-9.\-]+(:[0-9]+)?$|^\[[0-9A-Fa-f:.]+\](:[0-9]+)?$`)

// compressed is a file's gzip encoding, made on first request.
type compressed struct {
	once sync.Once
	body []byte
	ok   bool
}

func (c *compressed) get(app fs.FS, name string) ([]byte, bool) {
	c.once.Do(func() {
		raw, err := fs.ReadFile(app, name)
		if err != nil {
			return
		}
		var b bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
		if _, err := zw.Write(raw); err != nil || zw.Close() != nil {
			return
		}
		c.body, c.ok = b.Bytes(), true
	})
	return c.body, c.ok
}

// compressible reports whether a file is text worth sending gzip-encoded.
func compressible(name string) bool {
	switch path.Ext(name) {
	case ".js", ".css", ".svg", ".json", ".txt", ".map":
		return true
	}
	return false
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		enc, q, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.TrimSpace(enc) == "gzip" && strings.ReplaceAll(strings.TrimSpace(q), " ", "") != "q=0" {
			return true
		}
	}
	return false
}
