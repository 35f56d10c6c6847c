#!/usr/bin/env bash
# Builds (idempotently) the Kubernetes binaries of the test cluster
# (test/kube): one multi-call binary, kube, holding kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet and kubectl v1.37.2, and
# the agent-sandbox controller v0.5.6, both from the module tools/kube (its
# own go.mod, so the main module does not require k8s.io/kubernetes).
#
# They go to $AIRLOCK_KUBE_DIR (default /var/cache/airlock-kube) under a key
# hashed from tools/kube/go.mod, go.sum, main.go, this script and `go version`: a second
# run finds them and returns at once. The components are symlinks to kube
# (it dispatches on the name it is called by). Prints the directory.
set -euo pipefail
cd "$(dirname "$0")/../tools/kube"

root="${AIRLOCK_KUBE_DIR:-/var/cache/airlock-kube}"
key="$( (cat go.mod go.sum main.go ../../scripts/kube.sh; go version) | sha256sum | cut -c1-16)"
dir="$root/$key"
ready() { [ -x "$dir/kube" ] && [ -x "$dir/agent-sandbox-controller" ] && [ -d "$dir/crds" ]; }
if ready; then
	echo "$dir"
	exit 0
fi

mkdir -p "$root"
# One build at a time per machine; the loser of a race finds the result.
exec 9>"$root/.lock"
flock 9
if ! ready; then
	echo "kube: building the Kubernetes v1.37.2 binaries into $dir (about 8 min cold on 2 cores)" >&2
	tmp="$(mktemp -d "$root/.build.XXXXXX")"
	trap 'rm -rf "$tmp"' EXIT
	start=$(date +%s)
	# The version the components report (the module proxy's source has no
	# git tree to stamp it from).
	v=k8s.io/component-base/version
	ldflags="-s -w -X $v.gitVersion=v1.37.2 -X $v.gitMajor=1 -X $v.gitMinor=37 -X $v.gitTreeState=clean"
	CGO_ENABLED=0 go build -p "${AIRLOCK_KUBE_BUILD_P:-2}" -trimpath -ldflags="$ldflags" \
		-o "$tmp/" . sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller
	# agent-sandbox's CRDs, from the same module version.
	mkdir "$tmp/crds"
	cp "$(go list -m -f '{{.Dir}}' sigs.k8s.io/agent-sandbox)"/k8s/crds/*.yaml "$tmp/crds/"
	for c in kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl; do
		ln -s kube "$tmp/$c"
	done
	# Earlier keys are stale: the cache holds one build.
	find "$root" -mindepth 1 -maxdepth 1 -not -name .lock -not -path "$tmp" -exec rm -rf {} +
	mv "$tmp" "$dir"
	trap - EXIT
	echo "kube: built in $(($(date +%s) - start))s ($(du -sh "$dir" | cut -f1))" >&2
fi
echo "$dir"
