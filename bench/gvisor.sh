#!/usr/bin/env bash
# gVisor beside its peers, each part in one alternating run:
#  1. start-up (bench/compare, the commands rotated):
#       airlock run --backend gvisor -- /bin/true      (create + exec + destroy, the pinned runsc)
#       runsc --network=none do /bin/true              (the same runsc's one-shot, no network either)
#       runsc do /bin/true                             (the same, with its default host network)
#       the first again with Debian's runsc (0.0~20221219, ptrace), when /usr/bin/runsc is there
#     Target (issue 26): airlock/runsc-do <= 0.5.
#  2. a system-call-heavy loop: 50,000 stat(2) calls (bench/statloop, timed
#     inside) under the same runsc on systrap, on ptrace, and bare on the
#     host, rotated, NL rounds; medians.
# N sets the start-up runs per command (default 30), NL the loop rounds
# (default 9). The runsc is the first on PATH (make deps links the pinned
# one into /usr/local/bin).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-30}
NL=${NL:-9}
runsc=$(command -v runsc) || { echo "bench/gvisor.sh: runsc not installed (make deps)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "bench/gvisor.sh: runsc needs root" >&2; exit 1; }
mkdir -p out/bench
make build >/dev/null # always this tree's binary
go build -o out/bench/compare ./bench/compare
gcc -O2 -static -o out/bench/statloop bench/statloop/statloop.c
bin=$PWD/bin/airlock
out=$PWD/out/bench
work=$(mktemp -d /tmp/airlock-bench-gvisor.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work" # the workspace of `airlock run` and runsc do's cwd
echo "runsc: $runsc ($("$runsc" --version | sed -n 1p))"
"$bin" doctor --json | grep -A10 '"gvisor"' | grep -E '"platform"|runsc_version' || true
debian=()
if [ -x /usr/bin/runsc ] && [ "$(readlink -f /usr/bin/runsc)" != "$(readlink -f "$runsc")" ]; then
	# Debian's, first on a PATH of its own (the backend takes runsc from PATH).
	debian=(::: env PATH=/usr/sbin:/usr/bin:/sbin:/bin "$bin" run --backend gvisor -- /bin/true)
	echo "debian-runsc: /usr/bin/runsc ($(/usr/bin/runsc --version | sed -n 1p))"
fi
echo "== start-up: /bin/true"
"$out/compare" -n "$N" -warmup 3 -name-a airlock -name-b do-nonet -name-c runsc-do -name-d debian -json "$out/gvisor.json" -- \
	"$bin" run --backend gvisor -- /bin/true ::: \
	"$runsc" --network=none do /bin/true ::: \
	"$runsc" do /bin/true "${debian[@]}"

echo "== 50,000 stat(2) of /tmp, timed inside (ms), $NL rounds rotated"
loop() { # platform|bare -> the loop's own ms
	if [ "$1" = bare ]; then
		"$out/statloop" 50000 /tmp
	else
		"$runsc" --network=none --platform="$1" do "$out/statloop" 50000 /tmp </dev/null
	fi
}
declare -A ms
kinds=(systrap ptrace bare)
for ((i = 0; i < NL; i++)); do
	for ((j = 0; j < 3; j++)); do
		k=${kinds[$(((i + j) % 3))]}
		ms[$k]+="$(loop "$k") "
	done
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
bare=$(echo "${ms[bare]}" | median)
for k in "${kinds[@]}"; do
	m=$(echo "${ms[$k]}" | median)
	printf '%-8s median %9.1f ms  (%s)  x%.1f bare\n' "$k" "$m" "${ms[$k]}" "$(echo "$m $bare" | awk '{print $1/$2}')"
done | tee "$out/gvisor-statloop.txt"
