#!/usr/bin/env bash
# gVisor start-up beside its peer, in one alternating run (bench/compare):
#   airlock run --backend gvisor -- /bin/true   (create + exec + destroy)
#   runsc --network=none do /bin/true           (runsc's own one-shot)
# Both use runsc's default ptrace platform here. Target: ratio <= 1.1.
# N sets the runs per command (default 30: each run is ~0.3-0.6 s).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-30}
command -v runsc >/dev/null || { echo "bench/gvisor.sh: runsc not installed (apt-get install runsc)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "bench/gvisor.sh: runsc needs root" >&2; exit 1; }
mkdir -p out/bench
make build >/dev/null # always this tree's binary
go build -o out/bench/compare ./bench/compare
bin=$PWD/bin/airlock
out=$PWD/out/bench
work=$(mktemp -d /tmp/airlock-bench-gvisor.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work" # the workspace of `airlock run` and runsc do's cwd
runsc --version | sed -n 1p
"$bin" doctor --json | grep -A8 '"gvisor"' | grep -E '"platform"|runsc_version' || true
"$out/compare" -n "$N" -warmup 3 -name-a airlock -name-b runsc-do -json "$out/gvisor.json" -- \
	"$bin" run --backend gvisor -- /bin/true ::: \
	runsc --network=none do /bin/true
