package admin

import (
	"embed"
	"io/fs"
	"net/http"
)

// The dashboard is plain HTML, CSS and JavaScript embedded in the binary: no CDN, no build
// step. It polls /stats and /stats/history, the same data /metrics serves.
//
//go:embed dashboard
var dashboardFiles embed.FS

// dashboardHandler serves the dashboard at / and its assets under /dashboard/.
func dashboardHandler() http.Handler {
	sub, err := fs.Sub(dashboardFiles, "dashboard")
	if err != nil {
		panic(err) // the embedded directory is part of the binary
	}
	files := http.StripPrefix("/dashboard/", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/":
			w.Header().Set("Cache-Control", "no-cache")
			http.ServeFileFS(w, r, sub, "index.html")
		case len(r.URL.Path) > len("/dashboard/") && r.URL.Path[:len("/dashboard/")] == "/dashboard/":
			files.ServeHTTP(w, r)
		default:
			http.NotFound(w, r)
		}
	})
}
