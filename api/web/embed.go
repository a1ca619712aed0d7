// Package web holds the dashboard's built files (api/web/dist, made by `npm run build` in
// this directory, which `make build` runs) for oikos-api to embed and serve at /. The
// Svelte sources are beside this file; dist/.gitkeep keeps the directory present on a
// checkout where the app was never built, so the api still compiles and its handler serves
// a page saying how to build the dashboard instead.
package web

import (
	"embed"
	"io/fs"
)

//go:embed all:dist
var dist embed.FS

// Dist is the built app: index.html at its root, hashed files under assets/.
func Dist() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // "dist" is a literal directory of the embed; Sub cannot fail on it
	}
	return sub
}
