#!/usr/bin/env bash
# Builds the Docker images the docker backend's tests and the browser use,
# from Debian's packages only (no registry is reached): an image with
# headless Chromium (airlock/browser), made with mmdebstrap and imported
# into the daemon. An image whose recipe is unchanged is not built again
# (its tag is the recipe's hash), so a warm run costs one inspect.
#   AIRLOCK_SKIP_BROWSER_IMAGE=1  skip it (the browser test then skips, or
#                                 fails in CI)
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${AIRLOCK_SKIP_BROWSER_IMAGE:-}" = 1 ]; then
	echo "docker-images: skipped (AIRLOCK_SKIP_BROWSER_IMAGE=1)"
	exit 0
fi
if ! ./scripts/dockerd.sh; then
	if [ -n "${CI:-}" ]; then exit 1; fi
	echo "docker-images: no docker daemon: images not built (the docker tests skip)" >&2
	exit 0
fi

suite=bookworm
# Chromium and a font for its text, busybox for a shell and httpd to serve
# pages inside; no recommends (mmdebstrap's default).
pkgs=chromium,fonts-dejavu-core,ca-certificates,busybox-static
recipe="v1 $suite $pkgs"
tag="airlock/browser:$(printf '%s' "$recipe" | sha256sum | cut -c1-12)"
if docker image inspect "$tag" >/dev/null 2>&1; then
	docker tag "$tag" airlock/browser:latest
	exit 0
fi
if ! command -v mmdebstrap >/dev/null; then
	echo "docker-images: mmdebstrap is missing (apt-get install mmdebstrap)" >&2
	exit 1
fi
# The host's own apt sources (its mirror), else Debian's.
mirror=http://deb.debian.org/debian
for f in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list; do
	if [ -s "$f" ]; then mirror=$f; break; fi
done
echo "docker-images: building $tag from Debian $suite ($pkgs)"
start=$(date +%s)
log=$(mktemp)
# Streamed straight into the daemon: no tarball on disk.
if ! mmdebstrap --quiet --variant=essential --include="$pkgs" \
	--dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
	--dpkgopt='path-exclude=/usr/share/info/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
	--dpkgopt='path-include=/usr/share/locale/en*' \
	"$suite" - "$mirror" 2>"$log" |
	docker import \
		--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		--change "LABEL dev.airlock.recipe=\"$recipe\"" \
		- "$tag" >/dev/null; then
	echo "docker-images: building $tag failed:" >&2
	tail -n 30 "$log" >&2
	rm -f "$log"
	exit 1
fi
rm -f "$log"
docker tag "$tag" airlock/browser:latest
echo "docker-images: $tag built in $(($(date +%s) - start))s"
