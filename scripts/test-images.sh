#!/usr/bin/env bash
# Builds the Debian test image the image tests use (images/imagestest):
# a minbase bookworm root filesystem made by mmdebstrap from Debian's own
# packages, as a tar in $AIRLOCK_TEST_IMAGES (/var/cache/airlock-test-images).
# Idempotent and cached: the file name carries a hash of the build
# options, so changing them builds anew and an unchanged one is reused.
# Two callers at once: the second waits for the first (flock).
set -euo pipefail
dir="${AIRLOCK_TEST_IMAGES:-/var/cache/airlock-test-images}"
suite=bookworm
# No docs, man pages or locales: a smaller image, a faster build.
opts=(--variant=minbase --format=tar
	--dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*'
	--dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*')
key=$(printf '%s\n' "$suite" "${opts[@]}" | sha256sum | cut -c1-12)
out="$dir/debian-$suite-minbase-$key.tar"
link="$dir/debian-$suite-minbase.tar"
if [ "$(id -u)" != 0 ]; then
	[ -s "$out" ] || echo "test-images: not root, cannot build $out (the Debian image tests skip)" >&2
	exit 0
fi
mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9
if [ ! -s "$out" ]; then
	echo "test-images: building $out with mmdebstrap (once per machine)"
	rm -f "$out.tmp"
	mmdebstrap --quiet --mode=root "${opts[@]}" "$suite" "$out.tmp"
	mv "$out.tmp" "$out"
fi
ln -sfn "$(basename "$out")" "$link"
