#!/usr/bin/env bash
# Makes sure a Docker daemon answers on its socket, starting Debian's
# dockerd when none does. Idempotent and safe to run from several callers
# at once (deps.sh, make bench, other test scripts): an answering daemon is
# left alone; concurrent starters serialise on a lock and the second finds
# the first one's daemon. Nothing else about the host is changed.
#   DOCKER_HOST   unix:///path of the socket (default /var/run/docker.sock)
#   DOCKERD_LOG   where a started dockerd logs (default /var/log/airlock-dockerd.log)
#   DOCKERD_WAIT  seconds to wait for it to answer (default 60)
set -euo pipefail

sock=/var/run/docker.sock
case "${DOCKER_HOST:-}" in
unix://*) sock=${DOCKER_HOST#unix://} ;;
"") ;;
*) echo "dockerd.sh: DOCKER_HOST=$DOCKER_HOST is not a unix socket: start that daemon yourself" >&2; exit 1 ;;
esac
log=${DOCKERD_LOG:-/var/log/airlock-dockerd.log}
wait_s=${DOCKERD_WAIT:-60}

answers() { curl -fsS --max-time 5 --unix-socket "$sock" http://localhost/_ping >/dev/null 2>&1; }

answers && exit 0
if ! command -v dockerd >/dev/null; then
	echo "dockerd.sh: no daemon answers on $sock and dockerd is not installed (apt-get install docker.io)" >&2
	exit 1
fi
if [ "$(id -u)" != 0 ]; then
	echo "dockerd.sh: no daemon answers on $sock, and starting dockerd needs root" >&2
	exit 1
fi
exec 9>"/run/airlock-dockerd.lock"
flock 9
answers && exit 0 # another caller started it while we waited for the lock

# A daemon that is up but not answering yet (started by someone else a
# moment ago) is waited for, not doubled.
pid=$(pgrep -x dockerd | head -n1 || true)
if [ -z "$pid" ]; then
	echo "dockerd.sh: starting dockerd (log: $log)"
	args=()
	[ "$sock" != /var/run/docker.sock ] && args+=(-H "unix://$sock")
	setsid dockerd "${args[@]}" >>"$log" 2>&1 </dev/null &
	pid=$!
fi
for _ in $(seq 1 $((wait_s * 5))); do
	answers && exit 0
	if ! kill -0 "$pid" 2>/dev/null; then
		echo "dockerd.sh: dockerd exited before answering on $sock; last lines of $log:" >&2
		tail -n 20 "$log" >&2 || true
		exit 1
	fi
	sleep 0.2
done
echo "dockerd.sh: dockerd (pid $pid) did not answer on $sock within ${wait_s}s; last lines of $log:" >&2
tail -n 20 "$log" >&2 || true
exit 1
