#!/usr/bin/env bash
# Builds (idempotently) gVisor's runsc and its containerd shim,
# containerd-shim-runsc-v1, at the pinned module version below (the
# gvisor.dev/gvisor module's Go branch, from the Go module proxy; why this
# one: docs/RATIONALE.md, "Why build runsc from the module proxy, and why
# this version?"), static (CGO_ENABLED=0), with the version stamped so that
# `runsc --version` and `airlock doctor` name it.
#
# They go to $AIRLOCK_RUNSC_DIR (default /var/cache/airlock-runsc) under the
# version and a key hashed from the version and the build recipe: a second
# run finds them and returns at once (~10 min cold on 2 cores). Prints the
# directory. scripts/deps.sh links them into /usr/local/bin.
set -euo pipefail

version=v0.0.0-20260905035102-160fafc42237
root="${AIRLOCK_RUNSC_DIR:-/var/cache/airlock-runsc}"
ldflags="-s -w -X gvisor.dev/gvisor/runsc/version.version=${version#v}"
recipe="CGO_ENABLED=0 go install -trimpath -ldflags='$ldflags' gvisor.dev/gvisor/runsc@$version gvisor.dev/gvisor/shim@$version"
key="$(printf '%s\n' "$recipe" | sha256sum | cut -c1-12)"
dir="$root/${version#v0.0.0-}-$key"
ready() { [ -x "$dir/runsc" ] && [ -x "$dir/containerd-shim-runsc-v1" ]; }
if ready; then
	echo "$dir"
	exit 0
fi

mkdir -p "$root"
# One build at a time per machine; the loser of a race finds the result.
exec 9>"$root/.lock"
flock 9
if ! ready; then
	echo "runsc: building gVisor runsc and containerd-shim-runsc-v1 $version into $dir (about 10 min cold on 2 cores)" >&2
	tmp="$(mktemp -d "$root/.build.XXXXXX")"
	trap 'rm -rf "$tmp"' EXIT
	start=$(date +%s)
	# Outside any module (go install PKG@VERSION builds the module as
	# published, with its own go.sum checked against the checksum database).
	(cd / && CGO_ENABLED=0 GOBIN="$tmp" GOFLAGS= go install -p "${AIRLOCK_RUNSC_BUILD_P:-2}" -trimpath -ldflags="$ldflags" \
		"gvisor.dev/gvisor/runsc@$version" "gvisor.dev/gvisor/shim@$version")
	mv "$tmp/shim" "$tmp/containerd-shim-runsc-v1"
	"$tmp/runsc" --version >/dev/null
	# Earlier builds are stale: the cache holds one.
	find "$root" -mindepth 1 -maxdepth 1 -not -name .lock -not -path "$tmp" -exec rm -rf {} +
	mv "$tmp" "$dir"
	trap - EXIT
	echo "runsc: built in $(($(date +%s) - start))s ($(du -sh "$dir" | cut -f1))" >&2
fi
echo "$dir"
