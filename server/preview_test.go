package server

import (
	"strconv"
	"testing"
)

func TestPreviewTarget(t *testing.T) {
	s := &Server{cfg: Config{PreviewDomain: "Preview.Example"}}
	for host, want := range map[string]string{
		"8000-sb-12ab.preview.example":      "sb-12ab:8000",
		"8000-sb-12ab.preview.example:8443": "sb-12ab:8000",
		"preview.example":                   "",
		"8000.preview.example":              "",
		"x-sb-1.preview.example":            "",
		"08000-sb-1.preview.example":        "",
		"8000-sb-1.evil.preview.example":    "",
		"8000-sb-1.preview.example.evil":    "",
		"70000-sb-1.preview.example":        "",
	} {
		id, port, ok := s.previewTarget(host)
		got := ""
		if ok {
			got = id + ":" + strconv.Itoa(port)
		}
		if got != want {
			t.Errorf("%s: %q, want %q", host, got, want)
		}
	}
}
