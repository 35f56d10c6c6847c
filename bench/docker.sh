#!/usr/bin/env bash
# Docker start-up beside its peer, in one alternating run (bench/compare):
#   airlock run --backend docker -- /bin/true   (create + exec + destroy:
#       the host's system dirs over the base image, the agent as init)
#   docker run --rm --network none IMG /bin/true (the docker CLI's one-shot;
#       IMG: a busybox image made here from Debian's busybox-static)
# Target: ratio <= 1.0. N sets the runs per command (default 30).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-30}
[ "$(id -u)" = 0 ] || { echo "bench/docker.sh: needs root (the docker socket)" >&2; exit 1; }
./scripts/dockerd.sh
command -v docker >/dev/null || { echo "bench/docker.sh: no docker CLI (apt-get install docker.io)" >&2; exit 1; }
mkdir -p out/bench
make build >/dev/null # always this tree's binary
go build -o out/bench/compare ./bench/compare
bin=$PWD/bin/airlock
out=$PWD/out/bench
img=airlock-bench/busybox:1
if ! docker image inspect "$img" >/dev/null 2>&1; then
	d=$(mktemp -d)
	mkdir -p "$d/bin"
	cp /bin/busybox "$d/bin/busybox"
	for a in true sh; do ln -s busybox "$d/bin/$a"; done
	tar -C "$d" -c . | docker import - "$img" >/dev/null
	rm -rf "$d"
fi
work=$(mktemp -d /tmp/airlock-bench-docker.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work" # the workspace of `airlock run`
docker version --format 'dockerd {{.Server.Version}}, API {{.Server.APIVersion}}'
"$out/compare" -n "$N" -warmup 3 -name-a airlock -name-b docker-run -json "$out/docker.json" -- \
	"$bin" run --backend docker -- /bin/true ::: \
	docker run --rm --network none "$img" /bin/true
