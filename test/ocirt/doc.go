// Package ocirt tests Airlock as an OCI runtime the way containerd and
// dockerd use it: a containerd of the test's own (own root, state,
// socket, CNI config) driven by crictl through the `airlock` runtime
// handler, and a dockerd of the test's own with `--add-runtime airlock`.
// Nothing here touches a shared daemon: each test starts its daemons on
// private directories and sockets and tears them down. It has no code
// outside its tests.
package ocirt
