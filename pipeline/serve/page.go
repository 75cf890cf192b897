package serve

import (
	_ "embed"
	"net/http"
)

// pageHTML is the page served at /: one self-contained file (no CDN, works
// offline) that calls /v1/attend.
//
//go:embed page/index.html
var pageHTML []byte

func servePage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data: blob:; style-src 'self' 'unsafe-inline'; script-src 'self' 'unsafe-inline'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Write(pageHTML)
}
