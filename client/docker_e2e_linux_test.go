package client_test

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/internal/testutil"
)

// A keyed tenant's docker sandbox, created through the API of a real root
// airlock serve, runs as a leased host uid, never host root: its processes
// and the files it writes in its workspace (also through the file API)
// are that uid's, and it cannot read a root-only file of the image root.
func TestDockerServerSandboxNotHostRoot(t *testing.T) {
	testutil.RequireRoot(t)
	if err := exec.Command("docker", "info").Run(); err != nil {
		testutil.Skip(t, "no docker daemon: "+err.Error())
	}
	s, err := startServe(t.TempDir(), "--backend", "docker", "--listen", freePort(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.stop)
	c, _ := client.New(s.tcp, client.WithAPIKey(s.newKey(t, "alice")))
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{Backend: "docker"})
	if err != nil {
		t.Fatalf("create: %v\n%s", err, s.logText())
	}
	defer c.Delete(ctx, sb.ID)
	if err := c.WriteFile(ctx, sb.ID, "/workspace/api.txt", strings.NewReader("x"), 0); err != nil {
		t.Fatal(err)
	}
	r, err := c.Run(ctx, sb.ID, "sh", "-c", "id -u; echo y > /workspace/made; stat -c %u /workspace/made /workspace/api.txt; cat /etc/shadow >/dev/null 2>&1 && echo read-shadow || echo no-shadow")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(r.Stdout))
	if len(f) != 4 {
		t.Fatalf("inside: %q %q", r.Stdout, r.Stderr)
	}
	uid, err := strconv.Atoi(f[0])
	if err != nil || uid == 0 || uid < 65536 {
		t.Fatalf("the sandbox runs as uid %q, want a leased range's", f[0])
	}
	if f[1] != f[0] || f[2] != f[0] || f[3] != "no-shadow" {
		t.Errorf("owners %s %s, want %s; %s", f[1], f[2], f[0], f[3])
	}
}
