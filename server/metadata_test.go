package server

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/errdefs"
)

// TestFileMetadata: PUT /files?metadata= gives the written file exactly
// that metadata, stat and list report it, a write without it leaves none,
// and bad metadata is refused before anything is written.
func TestFileMetadata(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	c := ts.local(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"author": "mish", "purpose": "upload"}
	if err := c.WriteFileMetadata(ctx, sb.ID, "/tmp/m/a", strings.NewReader("x"), 0, want); err != nil {
		t.Fatal(err)
	}
	if fi, err := c.Stat(ctx, sb.ID, "/tmp/m/a"); err != nil || !maps.Equal(fi.Metadata, want) {
		t.Fatalf("stat: %v %v", fi.Metadata, err)
	}
	if l, err := c.ListDir(ctx, sb.ID, "/tmp/m"); err != nil || len(l) != 1 || !maps.Equal(l[0].Metadata, want) {
		t.Fatalf("list: %+v %v", l, err)
	}
	if err := c.WriteFile(ctx, sb.ID, "/tmp/m/a", strings.NewReader("y"), 0); err != nil {
		t.Fatal(err)
	}
	if fi, _ := c.Stat(ctx, sb.ID, "/tmp/m/a"); fi.Metadata != nil {
		t.Fatalf("after an overwrite without metadata: %v", fi.Metadata)
	}
	for what, m := range map[string]map[string]string{
		"bad key":   {"bad key": "v"},
		"bad value": {"k": "a\nb"},
		"too large": {"k": strings.Repeat("v", 4096)},
	} {
		err := c.WriteFileMetadata(ctx, sb.ID, "/tmp/m/refused", strings.NewReader("x"), 0, m)
		if !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "metadata") {
			t.Errorf("%s: %v, want invalid metadata", what, err)
		}
	}
	if _, err := c.Stat(ctx, sb.ID, "/tmp/m/refused"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a refused write left a file: %v", err)
	}
}
