#!/usr/bin/env bash
# Starts dockerd (Debian's docker.io) when it is installed and not running,
# and waits until it answers. Idempotent and safe to call from two places
# at once (deps.sh, bench.sh, another helper's setup): the start is done
# under a lock and only when `docker info` does not answer. Exits 0 with a
# notice when dockerd is not installed or we are not root.
set -euo pipefail
command -v dockerd >/dev/null || { echo "dockerd: not installed" >&2; exit 0; }
docker info >/dev/null 2>&1 && exit 0
[ "$(id -u)" = 0 ] || { echo "dockerd: not running and not root: cannot start it" >&2; exit 0; }
exec 9>/run/airlock-dockerd.lock
flock 9
if ! docker info >/dev/null 2>&1; then
	if ! pgrep -x dockerd >/dev/null; then
		echo "dockerd: starting"
		# setsid: not in our process group, so it outlives this script.
		setsid dockerd >/var/log/airlock-dockerd.log 2>&1 < /dev/null &
	fi
	for _ in $(seq 1 120); do
		docker info >/dev/null 2>&1 && break
		sleep 0.5
	done
fi
docker info >/dev/null 2>&1 || { echo "dockerd: did not answer in 60s (see /var/log/airlock-dockerd.log)" >&2; exit 1; }
