package serve

import (
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"net/http"
	"regexp"
	"strings"
)

// pageHTML is the page served at /: one self-contained file (no CDN, works
// offline) that calls /v1/attend.
//
//go:embed page/index.html
var pageHTML []byte

// pageCSP is the page's Content-Security-Policy: its own inline script and
// style, allowed by hash, images it makes from the chosen file (blob:) and
// its data: favicon, and requests to this origin only; nothing else.
var pageCSP = contentSecurityPolicy(pageHTML)

// inlineBlock matches an inline <script> or <style> element without
// attributes; its body is what the hash covers.
var inlineBlock = regexp.MustCompile(`(?s)<(script|style)>(.*?)</(?:script|style)>`)

// contentSecurityPolicy returns the policy for html: script-src and
// style-src list the SHA-256 hashes of its inline scripts and styles
// ('none' when it has none).
func contentSecurityPolicy(html []byte) string {
	hashes := map[string][]string{}
	for _, m := range inlineBlock.FindAllSubmatch(html, -1) {
		sum := sha256.Sum256(m[2])
		tag := string(m[1])
		hashes[tag] = append(hashes[tag], "'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'")
	}
	src := func(tag string) string {
		if len(hashes[tag]) == 0 {
			return "'none'"
		}
		return strings.Join(hashes[tag], " ")
	}
	return "default-src 'none'; script-src " + src("script") + "; style-src " + src("style") +
		"; img-src blob: data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
}

func servePage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", pageCSP)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Write(pageHTML)
}
