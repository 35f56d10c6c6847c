// Package oci is Airlock as an OCI runtime: the runc-compatible commands
// (create, start, state, kill, delete, exec, ps, features) that
// containerd's io.containerd.runc.v2 shim and dockerd call, run on the
// native backend's kernel machinery (namespaces, Landlock, Airlock's
// seccomp floor, capability drop, cgroups, the fsguard write mediator).
//
// In runtime mode containerd or dockerd prepared the bundle: its rootfs,
// config.json, and the namespaces to join. The package honours
// config.json and applies Airlock's protections on top of it: an Airlock
// policy chosen by annotation (airlock.dev/profile, airlock.dev/policy)
// within the operator's ceiling (OperatorConfig), Landlock, the seccomp
// floor stacked under the container's own filter, no_new_privs, the
// set-id and protected-config rules, and capabilities never above the
// ceiling.
//
// It must never widen what config.json asks for, never start a container
// with a protection silently missing, never let a container name its own
// guard (annotations choose among what the operator allows, never a
// path), and never leave a cgroup, process or state directory behind a
// failed create or a delete. Each container's process is the one whose
// host pid is in the pid file: a descendant of the caller (the shim),
// exec'd in place once `start` says so.
package oci
