#!/usr/bin/env bash
# Runs every Fuzz target in the module for a short time each ($1, e.g. 5s).
set -euo pipefail
cd "$(dirname "$0")/.."
t=${1:-5s}
n=0
for pkg in $(go list ./...); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	for f in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //'); do
		echo "fuzz $pkg $f ($t)"
		go test -run '^$' -fuzz "^$f\$" -fuzztime "$t" "$pkg" >/tmp/airlock-fuzz.log 2>&1 || { cat /tmp/airlock-fuzz.log; echo "fuzz: $n passed, 1 failed"; exit 1; }
		n=$((n + 1))
	done
done
echo "fuzz: $n passed, 0 failed"
