// Package console is the operators' web console served at /console/: a
// few static files (HTML, CSS and JavaScript modules, no build step)
// embedded in the binary. The pages call the server's public API from the
// browser; nothing here reads the engine or the store.
//
// Every answer carries Content-Security-Policy: default-src 'self', so the
// console loads nothing from anywhere else and runs no inline script or
// style. The files themselves are public (they hold no data): the API
// calls they make are authenticated with the token the operator types.
package console

import (
	"bytes"
	"embed"
	"html"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/asmp-dev/asmp/internal/edge/httpx"
	"github.com/asmp-dev/asmp/protocol"
)

//go:embed static
var static embed.FS

// CSP is the Content-Security-Policy of every console answer.
const CSP = "default-src 'self'"

// Files returns the console's files (index.html at the root).
func Files() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree always has static/
	}
	return sub
}

// Handler serves the console's files under prefix (e.g. "/console/"):
// prefix itself is index.html.
func Handler(prefix string) http.Handler {
	files := Files()
	fsrv := http.FileServerFS(files)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cache-Control", "no-cache")
		name := strings.TrimPrefix(r.URL.Path, prefix)
		if name == "" || name == "index.html" {
			name = "index.html"
		}
		clean := path.Clean("/" + name)[1:]
		if st, err := fs.Stat(files, clean); err != nil || st.IsDir() {
			notFound(w, r, prefix, name)
			return
		}
		if clean == "index.html" {
			// FileServer redirects /index.html to ./: serve the bytes.
			b, _ := fs.ReadFile(files, clean)
			h.Set("Content-Type", "text/html; charset=utf-8")
			http.ServeContent(w, r, clean, time.Time{}, bytes.NewReader(b))
			return
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/" + clean
		fsrv.ServeHTTP(w, r2)
	})
}

// notFound answers a path under the console that holds no file (name is
// the path below prefix, the console's root): as every error of the server, a
// JSON body with a hint, except for a browser opening it as a page
// (text/html first in Accept), which gets a small page in the console's
// style with a link to it.
func notFound(w http.ResponseWriter, r *http.Request, prefix, name string) {
	w.Header().Add("Vary", "Accept")
	// The console's root, relative to the asked path, so that the link
	// also holds behind a proxy that serves the server under a prefix.
	root := strings.Repeat("../", strings.Count(name, "/"))
	if root == "" {
		root = "./"
	}
	if !httpx.WantsHTML(r) {
		httpx.WriteError(w, nil, protocol.Errorf(protocol.ENotFound,
			"The console has no file at %s. Open the console at %s; its pages are addressed after the # (%s#/runs).",
			protocol.Truncate(r.URL.Path, 200), prefix, prefix))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNotFound)
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write([]byte(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>Not found · asmp console</title>
<link rel="stylesheet" href="` + root + `console.css">
<link rel="icon" href="` + root + `favicon.svg" type="image/svg+xml">
</head>
<body>
<main id="main">
<h1>Not found</h1>
<p class="notice error" role="alert">The console has no file at <code>` + html.EscapeString(protocol.Truncate(r.URL.Path, 200)) + `</code>. <a href="` + root + `">Open the console</a>.</p>
</main>
</body>
</html>
`))
}
