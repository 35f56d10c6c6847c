#!/usr/bin/env bash
# Fetches the microvm backend's guest kernel: Debian's linux-image package,
# pinned by version and sha256 below, through apt (`apt-get download`), and
# prepares $AIRLOCK_MICROVM_DIR (default: var/microvm in the repository,
# which the backend finds beside bin/airlock): the uncompressed vmlinux, the
# modules the guest loads, kernel.json. Idempotent: nothing is fetched when
# the directory already holds the pinned package. Airlock never fetches or
# extracts a kernel at run time; this is the only place.
#
# To move to a new kernel: `apt-cache depends linux-image-amd64`, then set
# PACKAGE, VERSION and SHA256 (sha256sum of the .deb apt-get downloads).
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGE=linux-image-6.1.0-57-amd64
VERSION=6.1.192-3
SHA256=14d219d01e1283261817d961dbb3895cb5b4288d0de10e0ba0632a0d993e15bf

dest=${AIRLOCK_MICROVM_DIR:-var/microvm}/kernel

if [ -f "$dest/kernel.json" ] && grep -q "\"deb_sha256\": \"$SHA256\"" "$dest/kernel.json"; then
	echo "guest-kernel: $PACKAGE $VERSION up to date in $dest"
	exit 0
fi
for tool in apt-get dpkg-deb xz sha256sum; do
	command -v "$tool" >/dev/null || { echo "guest-kernel: $tool is needed (Debian: apt, dpkg, xz-utils, coreutils)" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp" # apt's _apt user writes the download
echo "guest-kernel: fetching $PACKAGE=$VERSION"
if ! (cd "$tmp" && apt-get download -q "$PACKAGE=$VERSION" >/dev/null 2>"$tmp/apt.err"); then
	if [ "$(id -u)" = 0 ]; then
		apt-get update -q >/dev/null
		(cd "$tmp" && apt-get download -q "$PACKAGE=$VERSION" >/dev/null 2>"$tmp/apt.err") || {
			echo "guest-kernel: apt-get download $PACKAGE=$VERSION failed (no longer on the mirror? update the pin in $0):" >&2
			cat "$tmp/apt.err" >&2
			exit 1
		}
	else
		cat "$tmp/apt.err" >&2
		exit 1
	fi
fi
deb=$(ls "$tmp"/*.deb)
got=$(sha256sum "$deb" | cut -d' ' -f1)
if [ "$got" != "$SHA256" ]; then
	echo "guest-kernel: $deb checksum mismatch: got $got, want $SHA256" >&2
	exit 1
fi
dpkg-deb -x "$deb" "$tmp/root"
mkdir -p "$(dirname "$dest")"
CGO_ENABLED=0 go run ./backend/microvm/internal/guestkernel/prep -root "$tmp/root" -out "$dest" \
	-package "$PACKAGE" -version "$VERSION" -deb-sha256 "$SHA256"
echo "guest-kernel: $PACKAGE $VERSION ready in $dest"
