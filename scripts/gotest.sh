#!/usr/bin/env bash
# gotest.sh [GO TEST ARGS]: go test, then the ten slowest packages, so that
# make test's log says where the time of its longest phase goes.
set -o pipefail
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"${GO:-go}" test "$@" 2>&1 | tee "$log"
rc=$?
echo "slowest packages:"
awk '($1 == "ok" || $1 == "FAIL" || $1 == "---") && $NF ~ /^[0-9.]+s$/ && $2 ~ /\// { t = $NF; sub(/s$/, "", t); printf "%8.1f s  %s\n", t, $2 }' "$log" |
	sort -rn | head -10
exit $rc
