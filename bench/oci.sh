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
