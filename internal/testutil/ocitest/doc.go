// Package ocitest holds what the tests that run Airlock under a real
// containerd share (test/ocirt's containerd and the Kubernetes cluster of
// internal/testutil/kubecluster): the containerd 1.6 configuration of a
// private daemon with the runc and airlock handlers, and OCI image tarballs
// built without a registry (Debian's static busybox, the Debian test root
// filesystems). It never touches a shared daemon: every path it writes is
// under a directory its caller owns.
package ocitest
