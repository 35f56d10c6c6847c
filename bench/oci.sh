#!/usr/bin/env bash
# Pod start-up through containerd's CRI with the airlock runtime handler
# beside the runc handler, one containerd, alternating pods (see
# test/ocirt BenchmarkPodStartup): run the pod sandbox, create and start
# its container. Reports each median and the ratio airlock/runc.
# N sets the pods per handler (default 10).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-10}
[ "$(id -u)" = 0 ] || { echo "bench/oci.sh: containerd needs root" >&2; exit 1; }
command -v crictl >/dev/null || export PATH=$PATH:$(go env GOPATH)/bin
make build >/dev/null # always this tree's binary
AIRLOCK_BIN=$PWD/bin/airlock go test -run '^$' -bench PodStartup -benchtime "${N}x" ./test/ocirt

# One container, create+start+wait+delete, with the runtime alone (no
# containerd): `airlock-runc run` beside `runc run` on the same busybox
# bundle (the default profile: no network, system dirs read-only).
command -v runc >/dev/null || { echo "bench/oci.sh: runc not installed" >&2; exit 1; }
go build -o out/bench/compare ./bench/compare
work=$(mktemp -d /tmp/airlock-bench-oci.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bundle/rootfs/bin" "$work/bundle/rootfs/proc" "$work/bundle/rootfs/dev" "$work/bundle/rootfs/sys" "$work/bin"
cp /bin/busybox "$work/bundle/rootfs/bin/" && ln -s busybox "$work/bundle/rootfs/bin/true"
ln -s "$PWD/bin/airlock" "$work/bin/airlock-runc"
(cd "$work/bundle" && runc spec && sed -i 's/"terminal": true/"terminal": false/; s/"sh"/"true"/' config.json)
echo
echo "== airlock-runc run vs runc run: busybox true"
out/bench/compare -n "$((N * 5))" -name-a airlock-runc -name-b runc -json out/bench/oci-run.json -- \
	"$work/bin/airlock-runc" --root "$work/airlock" run --bundle "$work/bundle" bench-a ::: \
	runc --root "$work/runc" run --bundle "$work/bundle" bench-r
