package docker

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/images"
	"github.com/airlock-dev/airlock/images/imagestest"
	"github.com/airlock-dev/airlock/sandbox"
)

// An image of airlock's own store runs on the docker backend by its store
// name: loaded into the real daemon on first use (untagged: the daemon's
// names stay as they were), by ID after that; a name neither has is
// ErrNotFound.
func TestStoreImage(t *testing.T) {
	b := testBackend(t)
	imagestest.BusyboxTar(t) // skips early when busybox is missing
	store, err := images.Open(filepath.Join(t.TempDir(), "store"), images.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// A name the daemon cannot have, unique per run.
	ref := "airlock-test/store-only:" + newID(t)[4:]
	im, err := store.AddImage(ctx, imagestest.Busybox(t), images.AddOptions{Names: []string{ref}})
	if err != nil {
		t.Fatal(err)
	}
	e, err := b.engine()
	if err != nil {
		t.Fatal(err)
	}
	defer e.ImageRemove(context.Background(), im.ID)
	_ = e.ImageRemove(ctx, im.ID) // a left-over of an earlier run
	if _, err := e.ImageInspect(ctx, ref); err == nil {
		t.Fatalf("the daemon already has %s", ref)
	}
	bs := New(Config{AgentBinary: b.cfg.AgentBinary, StateDir: b.cfg.StateDir, Owner: b.cfg.Owner, Images: store})
	spec := func() sandbox.Spec {
		return sandbox.Spec{Policy: testPolicy(t, workspace(t), nil), Image: ref}
	}
	sb := create(t, bs, spec())
	if st, out := sh(t, sb, "echo $IMAGE_VAR"); st.Code != 0 || out != "from-image" {
		t.Errorf("inside the store image: %d %q", st.Code, out)
	}
	ins, err := e.ImageInspect(ctx, im.ID)
	if err != nil {
		t.Fatalf("the daemon after the first use: %v", err)
	}
	if len(ins.RepoTags) != 0 {
		t.Errorf("loaded with tags %v, want none", ins.RepoTags)
	}
	// The second sandbox finds it in the daemon.
	created := ins.Metadata.LastTagTime
	sb2 := create(t, bs, spec())
	if st, out := sh(t, sb2, "echo $IMAGE_VAR"); st.Code != 0 || out != "from-image" {
		t.Errorf("second sandbox: %d %q", st.Code, out)
	}
	if ins2, _ := e.ImageInspect(ctx, im.ID); !ins2.Metadata.LastTagTime.Equal(created) {
		t.Errorf("image loaded again")
	}
	// Without the store, the daemon alone does not know the name.
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	sp := spec()
	sp.ID = newID(t)
	if _, err := b.Create(cctx, sp); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("store name without the store: %v, want ErrNotFound", err)
	}
	if err := leaks(b, sp.ID); err != nil {
		t.Errorf("failed create left: %v", err)
	}
}
