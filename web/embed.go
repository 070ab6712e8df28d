// Package web serves agentry's web app: the built assets in dist/, embedded in the binary.
package web

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed dist
var dist embed.FS

// Handler serves the built web app.
func Handler() http.Handler {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // dist is embedded at build time; a missing directory fails the build
	}
	return http.FileServerFS(sub)
}
