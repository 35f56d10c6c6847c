#!/usr/bin/env bash
# Builds the Debian test images the image tests use (images/imagestest):
# minbase bookworm root filesystems made by mmdebstrap from Debian's own
# packages, as tars in $AIRLOCK_TEST_IMAGES (/var/cache/airlock-test-images):
# debian-bookworm-minbase.tar, and debian-bookworm-python.tar (minbase with
# python3, pip and CPython's own test suite, for the root-inside tests).
# Idempotent and cached: a file name carries a hash of its build options,
# so changing them builds anew and an unchanged one is reused. Two callers
# at once: the second waits for the first (flock).
set -euo pipefail
dir="${AIRLOCK_TEST_IMAGES:-/var/cache/airlock-test-images}"
suite=bookworm
# No docs, man pages or locales: a smaller image, a faster build.
opts=(--variant=minbase --format=tar
	--dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*'
	--dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*')
if [ "$(id -u)" != 0 ]; then
	echo "test-images: not root, cannot build the Debian images (their tests skip unless built)" >&2
	exit 0
fi
mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9
# build NAME [EXTRA OPTION...]: $dir/debian-$suite-NAME.tar.
build() {
	local name=$1
	shift
	local all=("${opts[@]}" "$@")
	local key
	key=$(printf '%s\n' "$suite" "${all[@]}" | sha256sum | cut -c1-12)
	local out="$dir/debian-$suite-$name-$key.tar"
	if [ ! -s "$out" ]; then
		echo "test-images: building $out with mmdebstrap (once per machine)"
		rm -f "$out.tmp"
		mmdebstrap --quiet --mode=root "${all[@]}" "$suite" "$out.tmp"
		mv "$out.tmp" "$out"
	fi
	ln -sfn "$(basename "$out")" "$dir/debian-$suite-$name.tar"
}
case "${1:-all}" in
all) build minbase; build python --include=python3,python3-pip,libpython3.11-testsuite ;;
minbase) build minbase ;;
python) build python --include=python3,python3-pip,libpython3.11-testsuite ;;
*) echo "usage: $0 [all|minbase|python]" >&2; exit 2 ;;
esac
