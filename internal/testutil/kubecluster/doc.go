// Package kubecluster runs a real one-node Kubernetes cluster for tests:
// etcd, kube-apiserver, kube-controller-manager, kube-scheduler and the
// kubelet v1.37.2 (scripts/kube.sh's multi-call binary), containerd 1.6
// with the runc and airlock handlers, a CNI bridge network, the
// RuntimeClasses airlock and runc, and agent-sandbox's CRDs and
// controller, all under a temp dir of its own.
//
// One cluster runs per machine at a time (a flock): the kubelet's port and
// the host state it changes are global. Whatever the cluster changes on
// the host (sysctls, iptables chains, host dirs, cgroups, mounts, network
// namespaces, the bridge) is recorded before it starts and restored when
// it stops, also when the harness dies (a guard process does it), and Stop
// fails if the host is not as before. It must never leave a process,
// mount, netns, veth or bridge behind.
package kubecluster
