package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/user"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/images"
	"github.com/airlock-dev/airlock/sandbox"
)

// backendNames lists the backends this build knows, in doctor's order.
func backendNames() []string { return backend.Names() }

// openBackend returns the backend called name ("" means native).
func openBackend(name string, log *slog.Logger) (sandbox.Backend, error) {
	return backend.Open(name, backend.Options{Log: log})
}

// openPolicyBackend is openBackend for a policy: "auto" picks the fastest
// available backend meeting the policy's isolation; imgs (nil: none) is
// the image store a docker backend loads the run's image from.
func openPolicyBackend(name, isolation string, imgs *images.Store, log *slog.Logger) (sandbox.Backend, error) {
	opts := backend.Options{Log: log, Images: imgs}
	if name == "auto" {
		return backend.Auto(context.Background(), isolation, opts)
	}
	return backend.Open(name, opts)
}

// withImageIDs reopens the native backend of a `run --image` with a host
// id range, as serve's sandboxes have: root inside then owns the image's
// files and may give them to other ids (apt's _apt, tar keeping owners),
// while none of those ids is another host user's. As root the range is
// airlock's reserved one and the workspace is bound idmapped, so what
// the sandbox's user writes there lands owned by the caller. A normal
// user's range is its own /etc/subuid and /etc/subgid entries, mapped by
// newuidmap and newgidmap, with the sandbox's user being the caller
// itself (backend/native/subid_linux.go); without them the run is
// refused (125), saying what is missing and how to add it. Other
// backends are returned as they are.
func withImageIDs(b sandbox.Backend, imgs *images.Store, log *slog.Logger) (sandbox.Backend, error) {
	if b.Name() != "native" {
		return b, nil
	}
	spec, err := imageIDSpec()
	if err != nil {
		return nil, err
	}
	nb, err := backend.Open("native", backend.Options{Log: log, Images: imgs, HostIDs: spec})
	if err != nil && os.Getuid() != 0 {
		return nil, fmt.Errorf("%s: %w", errImageIDs, err)
	}
	return nb, err
}

// imageIDSpec is the host id source (backend.Options.HostIDs) of a `run
// --image` on native: airlock's reserved range as root, else the caller's
// own subordinate ranges.
func imageIDSpec() (string, error) {
	if os.Getuid() == 0 {
		return "auto", nil
	}
	u, err := user.Current()
	if err != nil {
		return "", fmt.Errorf("run --image as a normal user: who is uid %d: %v: %w", os.Getuid(), err, sandbox.ErrUnavailable)
	}
	return "user:" + u.Username, nil
}

// errImageIDs prefixes why a normal user's `run --image` on the native
// backend has no host id range (issue 25 item 7).
const errImageIDs = "run --image on the native backend gives the image's users host ids of their own: " +
	"for a normal user its /etc/subuid and /etc/subgid ranges (through newuidmap), " +
	"or run it in a sandbox of `airlock serve` (airlock sandbox create --image REF)"

// openRunBackend is openPolicyBackend for `airlock run`: with an image,
// withImageIDs.
func openRunBackend(name, isolation string, image bool, imgs *images.Store, log *slog.Logger) (sandbox.Backend, error) {
	b, err := openPolicyBackend(name, isolation, imgs, log)
	if err != nil || !image {
		return b, err
	}
	return withImageIDs(b, imgs, log)
}
