#!/bin/sh
# Issue 24 #7: the server's RSS while 48 clients read buffered execs of
# 2x16 MiB output at 256 KiB/s (target < 300 MB). A real `airlock serve`
# (root, native backend, TCP with API keys) is started by the escape
# suite's harness; the figure is printed on the "slow-readers" line.
# Usage (as root): bench/slowreaders.sh
set -eu
cd "$(dirname "$0")/.."
make build >/dev/null
AIRLOCK_BIN=$PWD/bin/airlock CI=1 go test ./test/escape/serve -count=1 -v \
	-run 'TestServeAttacks/slow-readers$' 2>&1 | grep -E 'server RSS|^(--- )?(PASS|FAIL|ok)'
