#!/usr/bin/env bash
# Image sandboxes beside Docker on the same image, in one alternating run
# per pair (bench/compare):
#   warm: airlock run --image IMG -- /bin/true    vs  docker run --rm IMG /bin/true
#         (create from an image the store has unpacked, first exec, destroy)
#   cold: the image removed from the store first, then imported from the
#         same `docker save` tarball and run, vs docker rmi + docker load + run
# The image is a busybox image made here from Debian's static busybox,
# built by dockerd (docker import) and saved, so both sides run the very
# same layers. N sets the runs per command (default 30 warm, 10 cold).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-30}
NC=${NC:-10}
[ "$(id -u)" = 0 ] || { echo "bench/image.sh: needs root (dockerd, overlay mounts)" >&2; exit 1; }
command -v docker >/dev/null || { echo "bench/image.sh: docker not installed (apt-get install docker.io)" >&2; exit 1; }
./scripts/dockerd.sh
[ -x /bin/busybox ] || { echo "bench/image.sh: no /bin/busybox (apt-get install busybox-static)" >&2; exit 1; }
mkdir -p out/bench
make build >/dev/null
go build -o out/bench/compare ./bench/compare
bin=$PWD/bin/airlock
out=$PWD/out/bench
work=$(mktemp -d /tmp/airlock-bench-image.XXXXXX)
img=airlock-bench/busybox:image
trap 'docker rmi -f "$img" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
export AIRLOCK_IMAGE_STORE=$work/store

# The image: a static busybox and its applet links.
mkdir -p "$work/rootfs/bin" "$work/rootfs/etc" "$work/rootfs/tmp" "$work/ws"
cp /bin/busybox "$work/rootfs/bin/"
for a in $(/bin/busybox --list); do [ "$a" = busybox ] || ln -s busybox "$work/rootfs/bin/$a"; done
echo 'root:x:0:0:root:/root:/bin/sh' > "$work/rootfs/etc/passwd"
tar -C "$work/rootfs" -c . | docker import - "$img" >/dev/null
docker save -o "$work/image.tar" "$img"
"$bin" image import -q "$work/image.tar" >/dev/null
cd "$work/ws"
echo "-- warm: the image is in both stores"
"$out/compare" -n "$N" -warmup 3 -name-a airlock -name-b docker -json "$out/image-warm.json" -- \
	"$bin" run --image "$img" -- /bin/true ::: \
	docker run --rm --network none "$img" /bin/true
echo "-- cold: removed first, then imported from the tarball and run"
"$out/compare" -n "$NC" -warmup 1 -name-a airlock -name-b docker -json "$out/image-cold.json" -- \
	sh -c "'$bin' image rm '$img' >/dev/null && '$bin' image prune >/dev/null && '$bin' image import -q '$work/image.tar' >/dev/null && '$bin' run --image '$img' -- /bin/true" ::: \
	sh -c "docker rmi -f '$img' >/dev/null && docker load -q -i '$work/image.tar' >/dev/null && docker run --rm --network none '$img' /bin/true"
