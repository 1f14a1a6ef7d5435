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
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
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
			h.Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte("No console file at " + r.URL.Path + "; open " + prefix + "\n"))
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
