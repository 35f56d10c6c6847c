#!/usr/bin/env bash
# `make demo`: a small Python "agent" tries to read a private key, write
# outside its workspace, reach a service on the host and read an API key,
# first on the host, then inside `airlock run` (native backend, default
# policy). Everything it touches is made here, in a temp dir, and removed.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${AIRLOCK_BIN:-bin/airlock}
# The probe runs inside the sandbox, which sees only system directories:
# it needs a system python3 (not one under a home directory).
py=/usr/bin/python3
need() { # need CMD PACKAGE: install a Debian package when CMD is missing
	[ -x "$1" ] || command -v "$1" >/dev/null && return 0
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		echo "demo: installing $2 (Debian package)"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$2" >/dev/null 2>&1 ||
			{ apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$2" >/dev/null; }
	else
		echo "demo: needs $1 (apt-get install $2)" >&2
		exit 1
	fi
}
need "$py" python3
need git git

tmp=$(mktemp -d /tmp/airlock-demo.XXXXXX)
srv=
cleanup() { [ -n "$srv" ] && kill "$srv" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

mkdir -p "$tmp/home/.ssh" "$tmp/outside" "$tmp/workspace"
echo "-----BEGIN OPENSSH PRIVATE KEY----- (demo bait)" > "$tmp/home/.ssh/id_ed25519"
cp examples/demo/probe.py "$tmp/workspace/"
# A nested repository (vendor/lib) whose hooks the probe goes after: a fresh
# one for each run.
newrepo() { rm -rf "$tmp/workspace/vendor"; mkdir -p "$tmp/workspace/vendor/lib" && git -C "$tmp/workspace/vendor/lib" init -q; rm -f "$tmp/workspace/helper"; }
newrepo
"$py" -m http.server --bind 127.0.0.1 0 --directory "$tmp/outside" >"$tmp/http.log" 2>&1 &
srv=$!
port=
for _ in $(seq 50); do
	port=$(grep -o 'port [0-9]*' "$tmp/http.log" | head -1 | cut -d' ' -f2) && [ -n "$port" ] && break
	sleep 0.1
done

export DEMO_HOME="$tmp/home" DEMO_OUTSIDE="$tmp/outside" DEMO_API_KEY=sk-demo-123456
cd "$tmp/workspace"
echo "== unconfined: python3 probe.py"
"$py" probe.py "$port"
rm -f "$tmp/outside/planted.txt"
newrepo
echo
echo "== confined: airlock run --env DEMO_HOME --env DEMO_OUTSIDE --env DEMO_API_KEY -- python3 probe.py"
echo "   (backend native, profile default; *_KEY variables are never passed, even when named)"
"$OLDPWD/$bin" run --result "$tmp/result.json" --env DEMO_HOME --env DEMO_OUTSIDE --env DEMO_API_KEY -- "$py" probe.py "$port"
echo
echo "airlock's result: $(cat "$tmp/result.json")"
if [ -e "$tmp/outside/planted.txt" ]; then echo "FAIL: the sandbox wrote outside its workspace"; exit 1; fi
if [ -e "$tmp/workspace/vendor/lib/.git/hooks/post-checkout" ]; then echo "FAIL: the sandbox planted a git hook"; exit 1; fi
echo "The workspace kept what the sandbox wrote: $(ls "$tmp/workspace" | tr '\n' ' ')"
