package client_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/internal/testutil"
)

// The SDK builds on api and errdefs only: no policy, no YAML, no IDNA
// tables in a program that just talks to a server. (The standard library's
// vendored copies under vendor/ are net/http's own and do not count.)
func TestSDKImportGraph(t *testing.T) {
	gobin := testutil.RequireBinary(t, "go")
	out, err := exec.Command(gobin, "list", "-deps", "github.com/airlock-dev/airlock/client", "github.com/airlock-dev/airlock/api").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	banned := []string{
		"go.yaml.in/yaml", "gopkg.in/yaml", "golang.org/x/net/idna", "golang.org/x/text",
		"github.com/airlock-dev/airlock/policy", "github.com/airlock-dev/airlock/sandbox",
		"github.com/airlock-dev/airlock/server", "github.com/airlock-dev/airlock/backend",
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, b := range banned {
			if pkg == b || strings.HasPrefix(pkg, b+"/") {
				t.Errorf("the SDK imports %s", pkg)
			}
		}
	}
}
