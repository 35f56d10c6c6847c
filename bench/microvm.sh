#!/usr/bin/env bash
# microvm start-up under TCG beside its peer, alternating in one run
# (bench/microvm): cold boot to first exec and restore-from-template to
# first exec, each against qemu-system-x86_64 -M microvm booting the same
# kernel with the same machine options and a trivial init. Target: ratio
# <= 1.1. N sets the runs of each (default 8: each run is a few seconds).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-8}
command -v qemu-system-x86_64 >/dev/null || { echo "bench/microvm.sh: qemu-system-x86_64 not installed (apt-get install qemu-system-x86)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "bench/microvm.sh: the microvm backend needs root" >&2; exit 1; }
[ -f var/microvm/kernel/kernel.json ] || ./scripts/guest-kernel.sh
mkdir -p out/bench
make build >/dev/null # always this tree's binary
CGO_ENABLED=0 go build -o out/bench/trivialinit ./bench/microvm/trivialinit
go build -o out/bench/microvm ./bench/microvm
out/bench/microvm -n "$N" -agent bin/airlock -kernel var/microvm/kernel -trivial-init out/bench/trivialinit -json out/bench/microvm.json
