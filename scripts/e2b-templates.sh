#!/usr/bin/env bash
# Builds E2B's two standard templates from Debian's own packages (mmdebstrap,
# bookworm; no image registry, no PyPI) and imports them into an image store:
#
#   base                 bash, coreutils, python3, node, git, curl, and E2B's
#                        default user "user" (home /home/user), the image's
#                        user; calls may still ask for root
#   code-interpreter-v1  base plus python3-matplotlib, -numpy and -pandas
#
# Each is kept as a docker save tarball in $AIRLOCK_E2B_TEMPLATES
# (/var/cache/airlock-e2b-templates) whose name carries a hash of its build
# options, so an unchanged template is never built twice; it is imported
# into $AIRLOCK_IMAGE_STORE (airlock's default store when unset) only when
# the store does not already hold that very image. Two callers at once: the
# second waits for the first (flock).
#
# usage: e2b-templates.sh [all|build] [AIRLOCK_BINARY]
#   all (default): build and import; build: only build the tarballs.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-all}
bin=${2:-${AIRLOCK_BIN:-bin/airlock}}
dir="${AIRLOCK_E2B_TEMPLATES:-/var/cache/airlock-e2b-templates}"
suite=bookworm
if [ "$(id -u)" != 0 ]; then
	echo "e2b-templates: not root, cannot build the templates (mmdebstrap --mode=root)" >&2
	exit 0
fi
case "$mode" in all | build) ;; *) echo "usage: $0 [all|build] [AIRLOCK_BINARY]" >&2; exit 2 ;; esac
opts=(--variant=minbase --format=tar
	--dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*'
	--dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*'
	# E2B's default user; its home is where relative paths of every call land.
	--customize-hook='chroot "$1" useradd --create-home --shell /bin/bash --uid 1000 --user-group user'
	# E2B runs every command as `bash -l -c CMD`: a login shell that forks
	# for nothing (scripts/e2b-login-profile.sh says what and why). Named
	# by a variable, so that the key below does not depend on the path.
	--customize-hook='"$AIRLOCK_E2B_PROFILE_HOOK" "$1"'
	--customize-hook='rm -rf "$1"/var/cache/apt/archives/*.deb "$1"/var/lib/apt/lists/*')
base_pkgs=bash,coreutils,python3,nodejs,git,curl,ca-certificates,procps,less
ci_pkgs=$base_pkgs,python3-matplotlib,python3-numpy,python3-pandas
export AIRLOCK_E2B_PROFILE_HOOK=$PWD/scripts/e2b-login-profile.sh
mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9

# dockerize ROOTFS_TAR OUT NAME: a docker save tarball of one layer (the root
# filesystem) named NAME:latest, in /home/user. The image runs as root (the
# sandbox's own setup needs it); the label dev.airlock.e2b-user names the
# user E2B's calls run as by default.
dockerize() {
	local rootfs=$1 out=$2 name=$3 tmp
	tmp=$(mktemp -d "$dir/.pack.XXXXXX")
	# shellcheck disable=SC2064
	trap "rm -rf '$tmp'" RETURN
	local diff
	diff=$(sha256sum "$rootfs" | cut -d' ' -f1)
	mkdir "$tmp/$diff"
	ln "$rootfs" "$tmp/$diff/layer.tar" 2>/dev/null || cp "$rootfs" "$tmp/$diff/layer.tar"
	# A fixed creation time keeps the config, so the image ID, the same
	# for the same packages.
	printf '{"architecture":"%s","os":"linux","created":"1970-01-01T00:00:00Z","config":{"WorkingDir":"/home/user","Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin","LANG=C.UTF-8","MPLBACKEND=Agg"],"Cmd":["/bin/bash"],"Labels":{"dev.airlock.e2b-template":"%s","dev.airlock.e2b-user":"user"}},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
		"$(dpkg --print-architecture)" "$name" "$diff" >"$tmp/config.json"
	local cfg
	cfg=$(sha256sum "$tmp/config.json" | cut -d' ' -f1)
	mv "$tmp/config.json" "$tmp/$cfg.json"
	printf '[{"Config":"%s.json","RepoTags":["%s:latest"],"Layers":["%s/layer.tar"]}]' "$cfg" "$name" "$diff" >"$tmp/manifest.json"
	tar -C "$tmp" -cf "$out.tmp" manifest.json "$cfg.json" "$diff"
	mv "$out.tmp" "$out"
}

# build NAME PACKAGES: $dir/NAME.tar (a link to the tarball of this build).
# The root filesystem is cached by its options, the image by its packing.
build() {
	local name=$1 pkgs=$2 key pack
	key=$(printf '%s\n' "$suite" "$pkgs" "${opts[@]}" "$(cat scripts/e2b-login-profile.sh)" | sha256sum | cut -c1-12)
	pack=$(printf '%s\n' "$key" "$(declare -f dockerize)" | sha256sum | cut -c1-12)
	local rootfs="$dir/$name-$key.rootfs.tar" out="$dir/$name-$pack.tar"
	if [ ! -s "$rootfs" ]; then
		echo "e2b-templates: building $name with mmdebstrap (once per machine)"
		mmdebstrap --quiet --mode=root "${opts[@]}" --include="$pkgs" "$suite" "$rootfs.tmp"
		mv "$rootfs.tmp" "$rootfs"
	fi
	if [ ! -s "$out" ]; then
		dockerize "$rootfs" "$out" "$name"
	fi
	ln -sfn "$(basename "$out")" "$dir/$name.tar"
}

# import NAME: into the store unless it holds this image already (the
# image ID is the config's digest, named in the tarball's manifest).
import() {
	local name=$1 want have
	want=$(tar -xOf "$dir/$name.tar" manifest.json | sed -n 's/.*"Config":"\([0-9a-f]*\)\.json".*/sha256:\1/p')
	have=$("$bin" image inspect "$name" 2>/dev/null | sed -n 's/.*"id": *"\(sha256:[0-9a-f]*\)".*/\1/p' | head -1 || true)
	if [ "$have" = "$want" ]; then
		echo "e2b-templates: $name is in the store ($want)"
		return
	fi
	"$bin" image import -q "$dir/$name.tar"
}

build base "$base_pkgs"
build code-interpreter-v1 "$ci_pkgs"
if [ "$mode" = all ]; then
	if [ ! -x "$bin" ]; then
		echo "e2b-templates: $bin is not built (make build)" >&2
		exit 1
	fi
	import base
	import code-interpreter-v1
fi
