// Package docker is Airlock's Docker backend: each sandbox is one container
// of a Docker Engine (talked to over its API with the official Go client,
// never the docker CLI) from a user-chosen image, or, with no image, from
// an empty base image with the host's system directories bound read-only
// as the native backend has them. The airlock binary is bind-mounted
// read-only as the container's init and serves the agent protocol on the
// container's attached stdio, so exec, files, PTYs and egress work as on
// every backend. Each container gets no network (egress only through the
// agent's tunnel to the host proxy), no capabilities, no-new-privileges, a
// read-only root, tmpfs and workspace mounts per policy, Docker's seccomp
// profile tightened with Airlock's rules, memory/CPU/pids limits, a private
// cgroup namespace, no log driver (the agent channel never reaches a log
// file) and labels that Cleanup finds it by.
//
// Docker's isolation is the weakest of the backends: the container shares
// the host kernel and dockerd runs as root. The package must say so (Probe,
// doctor), never widen the policy it is given, never start a container
// with a weaker setup than the policy asks without failing (a missing
// daemon is an error naming what to install), and never leave a
// container, volume or state directory behind when Create fails or a
// sandbox ends.
package docker
