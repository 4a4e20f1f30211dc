// Package fileserver is the standard-library file server the amduat
// server's GET is measured against (issue 24; BENCHMARKS.md, the
// server/get-vs-files rows, and server's BenchmarkGetSmall): one file per
// artifact in a directory, answered by http.ServeContent, which sends a
// large body with sendfile. It holds no logic of the project: it is the
// limit of net/http on the machine.
package fileserver

import (
	"net/http"
	"os"
	"path/filepath"
)

// Handler answers GET /f/NAME with the file NAME of dir (404 when it
// cannot be opened).
func Handler(dir string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /f/{name}", func(w http.ResponseWriter, r *http.Request) {
		f, err := os.Open(filepath.Join(dir, filepath.Base(r.PathValue("name"))))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		http.ServeContent(w, r, "", fi.ModTime(), f)
	})
	return mux
}
