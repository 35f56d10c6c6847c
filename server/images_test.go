package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/errdefs"
	"github.com/airlock-dev/airlock/images"
	"github.com/airlock-dev/airlock/images/imagestest"
	"github.com/airlock-dev/airlock/internal/testutil"
)

func withImages(t testing.TB) func(*Config) {
	return func(c *Config) {
		testutil.RequireLinux(t)
		st, err := images.Open(filepath.Join(t.TempDir(), "images"), images.Options{})
		if err != nil {
			t.Fatal(err)
		}
		c.Images = st
	}
}

func busyboxTarball(t *testing.T, tag string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tg, _ := name.NewTag(tag)
	if err := tarball.Write(tg, imagestest.Busybox(t), &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestImagesAPI(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, withImages(t))
	ctx := context.Background()
	local := ts.local(t)
	tenant := ts.tenant(t, "acme")
	ims, err := local.ImportImage(ctx, bytes.NewReader(busyboxTarball(t, "airlock-test/busybox:1")), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(ims) != 1 || ims[0].Names[0] != "airlock-test/busybox:1" || len(ims[0].Layers) != 1 {
		t.Fatalf("imported %+v", ims)
	}
	for _, c := range []*client.Client{local, tenant} {
		list, err := c.Images(ctx)
		if err != nil || len(list) != 1 {
			t.Errorf("list: %v %v", list, err)
		}
		for _, ref := range []string{"airlock-test/busybox:1", ims[0].ID, ims[0].ID[7:19]} {
			if im, err := c.Image(ctx, ref); err != nil || im.ID != ims[0].ID {
				t.Errorf("inspect %q: %v %v", ref, im, err)
			}
		}
		if _, err := c.Image(ctx, "nope:1"); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("inspect missing: %v", err)
		}
	}
	// Changing the store is the operator's.
	for what, err := range map[string]error{
		"pull": func() error {
			_, err := tenant.PullImage(ctx, api.PullImageRequest{Ref: "127.0.0.1:1/x:1"})
			return err
		}(),
		"import": func() error {
			_, err := tenant.ImportImage(ctx, bytes.NewReader(busyboxTarball(t, "evil:1")), "")
			return err
		}(),
		"rm":    func() error { _, err := tenant.RemoveImage(ctx, "airlock-test/busybox:1"); return err }(),
		"prune": func() error { _, err := tenant.PruneImages(ctx, true); return err }(),
	} {
		if !errors.Is(err, errdefs.ErrPermission) {
			t.Errorf("tenant %s: %v, want permission denied", what, err)
		}
	}
	if _, err := local.PullImage(ctx, api.PullImageRequest{Ref: "127.0.0.1:1/x:1"}); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("pull from nowhere: %v", err)
	}
	if _, err := local.ImportImage(ctx, bytes.NewReader([]byte("not a tar")), ""); !errors.Is(err, errdefs.ErrInvalid) {
		t.Errorf("import of junk: %v", err)
	}
	if _, err := local.RemoveImage(ctx, "airlock-test/busybox:1"); err != nil {
		t.Fatal(err)
	}
	rep, err := local.PruneImages(ctx, false)
	if err != nil || rep.Layers != 1 {
		t.Errorf("prune: %+v %v", rep, err)
	}
}

func TestCreateFromImage(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, withImages(t))
	ctx := context.Background()
	local := ts.local(t)
	if _, err := local.ImportImage(ctx, bytes.NewReader(busyboxTarball(t, "bb:1")), ""); err != nil {
		t.Fatal(err)
	}
	tenant := ts.tenant(t, "acme")
	sb, err := tenant.Create(ctx, api.CreateSandboxRequest{Image: "bb:1"})
	if err != nil {
		t.Fatal(err)
	}
	if sb.Workdir != "/workspace" || sb.Image != "bb:1" {
		t.Errorf("sandbox %+v", sb)
	}
	spec, ok := ts.fake.Spec(sb.ID)
	if !ok || spec.Root == nil || len(spec.Root.Layers) != 1 || spec.Image != "bb:1" {
		t.Fatalf("spec %+v", spec)
	}
	pol := spec.Policy
	if pol.Filesystem.Image != "bb:1" || pol.Filesystem.WorkspaceInside() != "/workspace" || pol.Process.Env["IMAGE_VAR"] != "from-image" || pol.Process.Env["HOME"] != "/root" {
		t.Errorf("policy %+v env %v", pol.Filesystem, pol.Process.Env)
	}
	// In use: pruning everything keeps it.
	if rep, err := local.PruneImages(ctx, true); err != nil || rep.Layers != 0 {
		t.Errorf("prune while in use: %+v %v", rep, err)
	}
	if err := tenant.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if rep, err := local.PruneImages(ctx, true); err != nil || rep.Layers != 1 {
		t.Errorf("prune after delete: %+v %v", rep, err)
	}
	for _, c := range []struct {
		image string
		want  error
	}{
		{"bb:1", errdefs.ErrNotFound}, // pruned
		{"/srv/images/alpine", errdefs.ErrInvalid},
	} {
		if _, err := local.Create(ctx, api.CreateSandboxRequest{Image: c.image}); !errors.Is(err, c.want) {
			t.Errorf("create from %q: %v, want %v", c.image, err, c.want)
		}
	}
	// A server without a store says so.
	ts2 := newTestServer(t, nil)
	if _, err := ts2.local(t).Create(ctx, api.CreateSandboxRequest{Image: "bb:1"}); !errors.Is(err, errdefs.ErrInvalid) {
		t.Errorf("no store: %v", err)
	}
	resp, _ := rawDo(t, ts2, "GET", "/v1/images", "", nil)
	if resp.StatusCode != http.StatusNotImplemented {
		t.Errorf("GET /v1/images without a store: %d", resp.StatusCode)
	}
}

// Nothing a tenant reads names the server's layout: the workspace is at
// /workspace, the policy shows sandbox paths (image sandboxes and the
// others alike).
func TestNoHostPathsForTenants(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, withImages(t))
	ctx := context.Background()
	if _, err := ts.local(t).ImportImage(ctx, bytes.NewReader(busyboxTarball(t, "bb:1")), ""); err != nil {
		t.Fatal(err)
	}
	tenant := ts.tenant(t, "acme")
	for _, req := range []api.CreateSandboxRequest{{}, {Image: "bb:1"}, {Profile: "coding-agent"}} {
		sb, err := tenant.Create(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tenant.Get(ctx, sb.ID)
		if err != nil {
			t.Fatal(err)
		}
		list, err := tenant.List(ctx, client.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for what, v := range map[string]any{"get": got, "list": list, "create": sb} {
			body, _ := json.Marshal(v)
			if bytes.Contains(body, []byte(ts.dir)) {
				t.Errorf("%+v: %s names the data dir %s: %s", req, what, ts.dir, body)
			}
		}
		if sb.Workdir != "/workspace" {
			t.Errorf("%+v: workdir %q", req, sb.Workdir)
		}
		spec, _ := ts.fake.Spec(sb.ID)
		if spec.Policy.Filesystem.WorkspacePath() == "" || spec.Policy.Filesystem.WorkspaceInside() != "/workspace" || req.Image == "" && spec.Policy.Process.Env["HOME"] != "/workspace" {
			t.Errorf("%+v: backend got workspace %q inside %q home %q", req, spec.Policy.Filesystem.WorkspacePath(), spec.Policy.Filesystem.WorkspaceInside(), spec.Policy.Process.Env["HOME"])
		}
	}
}
