#!/usr/bin/env bash
# `make bench`: start-up of each backend beside its peer, in one alternating
# run per pair, printed as medians and a ratio (see bench/compare). Results
# also land in out/bench/*.json. N sets the runs per command.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-200}
mkdir -p out/bench
go build -o out/bench/compare ./bench/compare
bin=$PWD/bin/airlock
work=$(mktemp -d /tmp/airlock-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work"

echo "== native vs bwrap: /bin/true"
"$OLDPWD/out/bench/compare" -n "$N" -name-a airlock -name-b bwrap -json "$OLDPWD/out/bench/native.json" -- \
	"$bin" run -- /bin/true ::: \
	bwrap --unshare-all --ro-bind / / --dev /dev --proc /proc --die-with-parent /bin/true
cd "$OLDPWD"
for extra in bench/*.sh; do
	[ -e "$extra" ] || continue
	echo
	echo "== $extra"
	bash "$extra"
done

# In-process and API benchmarks (p50 figures are reported as custom metrics).
echo
echo "== Go benchmarks: server API over the unix socket, egress proxy, wasm in-process"
AIRLOCK_BIN=$PWD/bin/airlock go test -run '^$' -bench 'ExecTrue|CreateWarm|ColdCreateExecDelete|DockerWarmCreateExec|PortProxy' -benchtime 200x ./client
# Pause/resume and checkpoint/rollback of a 100 MiB workspace (issue 15), beside their peers.
AIRLOCK_BIN=$PWD/bin/airlock go test -run '^$' -bench 'PauseResume100MB|CheckpointRollback100MB' -benchtime 5x ./client
go test -run '^$' -bench . -benchtime 2s ./egress
go test -run '^$' -bench 'ExecCached|SandboxLifecycle' -benchtime 2000x ./backend/wasm
