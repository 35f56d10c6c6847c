package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

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

// errImageIDs is why `run --image` on the native backend refuses a normal
// user (issue 25 item 7).
const errImageIDs = "run --image on the native backend gives the image's users a range of host ids of their own, " +
	"which airlock leases only as root; a normal user's range (its /etc/subuid and /etc/subgid entries, " +
	"through newuidmap) is not supported yet: run it as root, or in a sandbox of `airlock serve` " +
	"(airlock sandbox create --image REF)"

// withImageIDs reopens the native backend of a `run --image` with a host
// id range (airlock's reserved one), as serve's sandboxes have: root
// inside then owns the image's files and may give them to other ids
// (apt's _apt, tar keeping owners), while none of those ids is a host
// user's. The workspace is bound idmapped, so what the sandbox's user
// writes there lands owned by the caller. Other backends are returned
// as they are.
func withImageIDs(b sandbox.Backend, imgs *images.Store, log *slog.Logger) (sandbox.Backend, error) {
	if b.Name() != "native" {
		return b, nil
	}
	if os.Getuid() != 0 {
		return nil, fmt.Errorf("%s: %w", errImageIDs, sandbox.ErrUnavailable)
	}
	return backend.Open("native", backend.Options{Log: log, Images: imgs, HostIDs: "auto"})
}

// openRunBackend is openPolicyBackend for `airlock run`: with an image,
// withImageIDs.
func openRunBackend(name, isolation string, image bool, imgs *images.Store, log *slog.Logger) (sandbox.Backend, error) {
	b, err := openPolicyBackend(name, isolation, imgs, log)
	if err != nil || !image {
		return b, err
	}
	return withImageIDs(b, imgs, log)
}
