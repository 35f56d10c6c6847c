package e2b

import "net/http"

// handleFiles is envd's /files: download (GET) and upload (POST).
func (e *envd) handleFiles(w http.ResponseWriter, r *http.Request, sc *scope, signed bool) {
	writeErr(w, http.StatusNotImplemented, "files: not yet")
}
