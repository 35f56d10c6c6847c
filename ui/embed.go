// Package ui holds the web console of `airlock serve`: its sources (src/,
// built with npm and esbuild) and the built bundle (dist/), committed so
// that `go build` needs no npm, and embedded here. It must never hold
// server logic: the console is a client of the public /v1 API.
package ui

import (
	"embed"
	"io/fs"
)

//go:embed dist
var dist embed.FS

// Dist is the built console: index.html, app.js, app.css.
func Dist() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // the directory is embedded above
	}
	return sub
}
