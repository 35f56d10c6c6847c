#!/usr/bin/env bash
# What workspace protection costs (native backend): every create, rename,
# link and write-open on a host path goes through the host's write
# mediator; reads never do. Prints the per-file cost of creating and of
# opening files on the host, inside the workspace (mediated) and inside
# the sandbox's /tmp (tmpfs, not mediated). N files per run (default 2000).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-2000}
make build >/dev/null
bin=$PWD/bin/airlock
py=/usr/bin/python3
work=$(mktemp -d /tmp/airlock-bench-protect.XXXXXX)
trap 'rm -rf "$work"' EXIT
cp bench/protect/writes.py "$work/"
cd "$work"
for i in 1 2 3; do
	echo "round $i"
	printf '  %-34s' "host, workspace:"; "$py" writes.py ./host "$N"; rm -rf ./host
	printf '  %-34s' "airlock run, workspace (mediated):"; "$bin" run -- "$py" writes.py ./ws "$N" 2>/dev/null; rm -rf ./ws
	printf '  %-34s' "airlock run, /tmp (tmpfs):"; "$bin" run -- "$py" writes.py /tmp/t "$N" 2>/dev/null
done
