package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/airlock-dev/airlock/images"
	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/server"
	"github.com/airlock-dev/airlock/server/store"
)

// The one bootstrap of a server, shared by `airlock serve` and the
// server `airlock mcp` embeds: the backends and the default one, the
// store, the server, and at the end its shutdown. What differs (flags,
// listeners, the data directory's lock, the E2B door) stays with each.

// openBackends opens the backends named (all available when none) and
// picks the default one: def when given, else native, else the first by
// name.
func openBackends(names []string, def, data, hostIDs string, imgs *images.Store, log *slog.Logger) (map[string]sandbox.Backend, string, error) {
	bs, err := openServeBackends(names, data, hostIDs, imgs, log)
	if err != nil {
		return nil, "", err
	}
	return bs, defaultBackend(def, bs), nil
}

// booted is a started server and the store it owns.
type booted struct {
	srv   *server.Server
	store *store.Store
	data  string
}

// bootServer opens the store in cfg.DataDir and starts a server on cfg
// (cfg.Store is set here). On an error the store is closed again.
func bootServer(ctx context.Context, cfg server.Config) (*booted, error) {
	st, err := store.Open(ctx, cfg.DataDir)
	if err != nil {
		return nil, err
	}
	cfg.Store = st
	srv, err := server.New(ctx, cfg)
	if err != nil {
		st.Close()
		return nil, err
	}
	return &booted{srv: srv, store: st, data: cfg.DataDir}, nil
}

// stop destroys every sandbox (within a minute), closes the store and
// removes the server's cgroup parents.
func (b *booted) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b.srv.Shutdown(ctx)
	b.store.Close()
	removeCgroupParents(cgroupParentFor(b.data))
}
