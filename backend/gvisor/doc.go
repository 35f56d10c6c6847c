// Package gvisor is Airlock's gVisor backend: each sandbox is one runsc
// container whose system calls are answered by gVisor's user-space kernel.
// Create writes an OCI bundle from the resolved policy (host system dirs
// read-only on an empty read-only root, the workspace read-write, deny paths
// hidden behind inaccessible mounts, protected workspace config read-only,
// private tmpfs, limits as cgroup fields and rlimits, no capabilities, no
// network but loopback) and starts `runsc run` with the airlock binary,
// bind-mounted read-only, as the container's init serving the agent protocol
// on its stdin/stdout.
//
// It must never widen the policy it is given, never choose a weaker setup
// silently (a missing runsc or platform is an error naming what to
// install), and never leave a runsc container, cgroup, bundle directory or
// workspace placeholder behind when Create fails or a sandbox ends.
package gvisor
