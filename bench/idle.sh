#!/usr/bin/env bash
# Idle memory of N sandboxes of airlock serve (native backend) beside N
# bwrap sandboxes each running `sleep` (the peer), in one run: the sum of
# the proportional set size (PSS: private pages plus each shared page
# divided among its users) of every process of the sandboxes, per sandbox,
# and the server's own RSS growth per sandbox. PSS counts the airlock
# binary's page-cache pages once across all inits, as the kernel holds
# them once. Target (issue 22): <= 2 MiB per sandbox. N (default 50).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-50}
[ -x bin/airlock ] || make build >/dev/null
bin=$PWD/bin/airlock
work=$(mktemp -d /tmp/airlock-bench-idle.XXXXXX)
chmod 711 "$work"
srv=
peers=()
cleanup() {
	[ -n "$srv" ] && kill "$srv" 2>/dev/null && wait "$srv" 2>/dev/null
	[ ${#peers[@]} -gt 0 ] && kill "${peers[@]}" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

# pss PID...: the summed PSS (kB) of the processes and all their descendants.
pss() {
	local all=() p
	for p in "$@"; do all+=("$p" $(descendants "$p")); done
	for p in "${all[@]}"; do awk '/^Pss:/ {print $2}' "/proc/$p/smaps_rollup" 2>/dev/null || true; done | awk '{s+=$1} END {print s+0}'
}
descendants() {
	local c
	for c in $(pgrep -P "$1" || true); do echo "$c"; descendants "$c"; done
}
rss() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

"$bin" serve --socket "$work/s.sock" --data "$work/data" --backend native --disk-quota none >"$work/serve.log" 2>&1 &
srv=$!
export AIRLOCK_HOST=unix://$work/s.sock
for _ in $(seq 100); do "$bin" sandbox ls >/dev/null 2>&1 && break; sleep 0.1; done
rss0=$(rss "$srv")
for _ in $(seq "$N"); do "$bin" sandbox create --timeout 30m >/dev/null; done
sleep 3 # the inits hand their start-up heap back after a second
kids=$(pgrep -P "$srv" | tr '\n' ' ')
airlock_pss=$(pss $kids)
rss1=$(rss "$srv")

for _ in $(seq "$N"); do
	bwrap --unshare-all --ro-bind / / --dev /dev --proc /proc --die-with-parent \
		sleep 3600 &
	peers+=($!)
done
sleep 2
bwrap_pss=$(pss "${peers[@]}")
kill "${peers[@]}" 2>/dev/null || true

python3 - "$N" "$airlock_pss" "$bwrap_pss" "$rss0" "$rss1" <<'PY'
import sys
n, a, b, r0, r1 = (int(x) for x in sys.argv[1:])
print(f"idle memory per sandbox, {n} sandboxes (PSS of the sandboxes' processes):")
print(f"  airlock serve (native)  {a / n / 1024:6.2f} MiB   (+ server RSS growth {max(r1 - r0, 0) / n / 1024:.2f} MiB per sandbox)")
print(f"  bwrap + sleep           {b / n / 1024:6.2f} MiB")
print(f"  ratio airlock/bwrap     {a / b:6.2f}   target: <= 2 MiB per sandbox")
PY
