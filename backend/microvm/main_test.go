package microvm

import (
	"os"
	"testing"
)

// sharedTemplates is the template directory of every test backend of this
// process: the first test of a VM size makes its template, later ones
// restore from it (on disk, not tmpfs: see Config.CacheDir).
var sharedTemplates string

func TestMain(m *testing.M) {
	d, err := os.MkdirTemp("", "mvt-templates-")
	if err != nil {
		panic(err)
	}
	sharedTemplates = d
	code := m.Run()
	os.RemoveAll(d)
	os.Exit(code)
}
