// Package kube tests Airlock on a real Kubernetes cluster: a one-node
// cluster of the test binary's own (internal/testutil/kubecluster: etcd,
// kube-apiserver, controller-manager, scheduler, kubelet v1.37.2,
// containerd with the runc and airlock handlers, agent-sandbox), pods on
// the airlock RuntimeClass beside runc ones, kubectl exec and logs, escape
// attempts from inside a pod, and the host as before once the cluster
// stops. It has no code outside its tests.
package kube
