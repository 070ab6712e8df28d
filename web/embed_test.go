package web

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

func TestHandler(t *testing.T) {
	t.Parallel()
	app := fstest.MapFS{
		"index.html":           {Data: []byte("<!doctype html><div id=root></div>")},
		"assets/index-abc.js":  {Data: []byte("console.log(1)")},
		"assets/index-abc.css": {Data: []byte("body{}")},
		"robots.txt":           {Data: []byte("User-agent: *")},
	}
	h := newHandler(app)
	get := func(path, host string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		if host != "" {
			req.Host = host
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}

	for _, p := range []string{"/", "/chat", "/chat/abc", "/runs/123?x=1", "/index.html"} {
		rec := get(p, "")
		require.Equal(t, http.StatusOK, rec.Code, p)
		require.Contains(t, rec.Body.String(), `<div id=root>`, p)
		require.Equal(t, "no-cache", rec.Header().Get("Cache-Control"), p)
		require.Contains(t, rec.Header().Get("Content-Type"), "text/html", p)
	}

	rec := get("/assets/index-abc.js", "")
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "public, max-age=31536000, immutable", rec.Header().Get("Cache-Control"))
	require.Contains(t, rec.Header().Get("Content-Type"), "javascript")
	require.Empty(t, rec.Header().Get("Content-Encoding"), "a client that did not ask for gzip")

	// Text assets go gzip-encoded to clients that take it.
	req := httptest.NewRequest(http.MethodGet, "/assets/index-abc.js", nil)
	req.Header.Set("Accept-Encoding", "gzip, deflate, br")
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "gzip", rec.Header().Get("Content-Encoding"))
	require.Contains(t, rec.Header().Get("Content-Type"), "javascript")
	zr, err := gzip.NewReader(rec.Body)
	require.NoError(t, err)
	plain, err := io.ReadAll(zr)
	require.NoError(t, err)
	require.Equal(t, "console.log(1)", string(plain))

	rec = get("/robots.txt", "")
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "no-cache", rec.Header().Get("Cache-Control"))

	// A missing asset is a 404, not the app.
	for _, p := range []string{"/assets/index-old.js", "/favicon.ico"} {
		require.Equal(t, http.StatusNotFound, get(p, "").Code, p)
	}

	csp := get("/chat", "app.example.com:8080").Header().Get("Content-Security-Policy")
	require.Contains(t, csp, "default-src 'self'")
	require.Contains(t, csp, "script-src 'self';")
	require.Contains(t, csp, "connect-src 'self' ws://app.example.com:8080;")
	require.Contains(t, csp, "frame-ancestors 'none'")
	require.NotContains(t, csp, "unsafe")

	// A Host header cannot add directives.
	csp = get("/", "evil.com; script-src *").Header().Get("Content-Security-Policy")
	require.Contains(t, csp, "connect-src 'self';")
	require.Equal(t, 1, strings.Count(csp, "script-src"))

	req = httptest.NewRequest(http.MethodPost, "/chat", nil)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusMethodNotAllowed, rec.Code)
}

func TestHandlerNotBuilt(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	newHandler(fstest.MapFS{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/chat", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	require.Contains(t, rec.Body.String(), "make web")
}
