// Package native is Airlock's default backend: each sandbox is a tree of
// processes in fresh Linux namespaces (user, mount, pid, net, ipc, uts,
// cgroup) on a root filesystem assembled from read-only bind mounts, confined
// further by Landlock, a seccomp filter, dropped capabilities, rlimits and a
// cgroup. The host side (Create) prepares everything it can in-process and
// starts the airlock binary as the sandbox's init (`airlock __native-init`),
// which applies the plan inside the namespaces and then serves the agent
// protocol.
//
// It must never widen the policy it is given, never start a sandbox with a
// protection silently missing (fail closed unless the policy allows degraded
// mode, which is logged and audited), and never leave a mount, cgroup,
// process, temp dir or placeholder behind when Create fails or a sandbox ends.
package native
