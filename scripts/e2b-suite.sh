#!/usr/bin/env bash
# Runs E2B's own JS SDK sandbox suite (packages/js-sdk/tests/sandbox/**,
# vitest, unmodified) from a copy of e2b-dev/E2B against a real
# `airlock serve --e2b-listen`, and prints pass/fail counts. Not part of
# make test: E2B's suite is never committed here.
#
#   scripts/e2b-suite.sh E2B_CHECKOUT [VITEST FILTER...]
#
# E2B_CHECKOUT is a checkout (or `git archive`) of e2b-dev/E2B outside this
# repository; its packages/js-sdk gets its dev dependencies from npm once.
# The `base` template is a Debian bookworm image made here with mmdebstrap
# (bash, coreutils, git, curl, python3, node, sudo, the user `user` with
# home /home/user), cached in $E2B_SUITE_CACHE (/var/cache/airlock-e2b-suite).
# Needs root (mmdebstrap, native sandboxes). Results: $out/results.json.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
src=${1:?usage: $0 E2B_CHECKOUT [VITEST FILTER...]}
shift
sdk=$(cd "$src/packages/js-sdk" && pwd)
cache=${E2B_SUITE_CACHE:-/var/cache/airlock-e2b-suite}
out=${E2B_SUITE_OUT:-$(mktemp -d /tmp/e2b-suite.XXXXXX)}
mkdir -p "$cache" "$out"
bin=$repo/bin/airlock
[ -x "$bin" ] || make -C "$repo" build

if [ ! -d "$sdk/node_modules/vitest" ]; then
	(cd "$sdk" && npm install --ignore-scripts --legacy-peer-deps --no-audit --no-fund --loglevel=error)
fi

# The base template: a Debian root filesystem as a docker-save tarball,
# cached per package list. python-is-python3: E2B's base template has
# `python` (its suite starts `python -m http.server`).
pkgs=bash,coreutils,git,curl,ca-certificates,python3,python-is-python3,procps,sudo,nodejs,findutils,grep,sed,less
# scripts/e2b-login-profile.sh: the login shell E2B runs every command in
# starts without a fork (as in scripts/e2b-templates.sh); part of the key.
rootfs=$cache/base-rootfs-$(cat <(echo "$pkgs") "$repo/scripts/e2b-login-profile.sh" | sha256sum | cut -c1-12).tar
if [ ! -s "$rootfs" ]; then
	mmdebstrap --quiet --mode=root --variant=minbase --format=tar \
		--include="$pkgs" \
		--dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
		--dpkgopt='path-exclude=/usr/share/locale/*' \
		--customize-hook='chroot "$1" useradd -m -s /bin/bash -u 1000 user' \
		--customize-hook='echo "user ALL=(ALL:ALL) NOPASSWD: ALL" > "$1/etc/sudoers.d/user"; chmod 0440 "$1/etc/sudoers.d/user"' \
		--customize-hook="$repo/scripts/e2b-login-profile.sh \"\$1\"" \
		bookworm "$rootfs.tmp"
	mv "$rootfs.tmp" "$rootfs"
fi
# Made anew when the root filesystem or this script (its config) changed.
image=$cache/base-image.tar
if [ ! -s "$image" ] || [ "$rootfs" -nt "$image" ] || [ "$0" -nt "$image" ]; then
	work=$(mktemp -d)
	cp "$rootfs" "$work/layer.tar"
	diff=$(sha256sum "$work/layer.tar" | cut -d' ' -f1)
	python3 - "$work" "$diff" <<'PY'
import hashlib, json, os, sys
work, diff = sys.argv[1], sys.argv[2]
cfg = json.dumps({"architecture": "amd64", "os": "linux",
    "config": {"User": os.environ.get("E2B_SUITE_IMAGE_USER", ""), "WorkingDir": "/home/user",
               "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/home/user"],
               "Cmd": ["/bin/bash"], "Labels": {"dev.airlock.e2b-user": "user"}},
    "rootfs": {"type": "layers", "diff_ids": ["sha256:" + diff]}}).encode()
name = hashlib.sha256(cfg).hexdigest() + ".json"
open(f"{work}/{name}", "wb").write(cfg)
json.dump([{"Config": name, "RepoTags": ["base:latest"], "Layers": ["layer.tar"]}], open(f"{work}/manifest.json", "w"))
PY
	tar -C "$work" -cf "$image.tmp" .
	rm -rf "$work"
	mv "$image.tmp" "$image"
fi

data=$out/data
AIRLOCK_IMAGE_STORE=$data/images "$bin" image import -q "$image" >/dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# Mode B (E2B_DOMAIN over TLS) unless E2B_SUITE_MODE=url (mode A: E2B_API_URL
# and E2B_SANDBOX_URL). Mode B is the one the whole suite can pass in: its
# request-shape tests mock https://api.$E2B_DOMAIN and fail whenever
# E2B_API_URL is set. *.DOMAIN must resolve to the listener: a wildcard DNS
# record does that; here a preload resolves *.e2b.localhost to 127.0.0.1
# for node (and nothing else), and a CA made here is trusted by node only.
mode=${E2B_SUITE_MODE:-domain}
domain=e2b.localhost
serveargs=(--e2b-listen "127.0.0.1:$port")
if [ "$mode" = domain ]; then
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=$domain" \
		-addext "subjectAltName=DNS:$domain,DNS:*.$domain" -keyout "$out/tls.key" -out "$out/tls.pem" 2>/dev/null
	cat >"$out/wildcard-dns.cjs" <<JS
// *.$domain resolves to 127.0.0.1 (a wildcard DNS record, for node only).
const dns = require('node:dns')
const lookup = dns.lookup
dns.lookup = function (host, opts, cb) {
  if (typeof opts === 'function') { cb = opts; opts = {} }
  if (typeof opts === 'number') opts = { family: opts }
  if (typeof host === 'string' && (host === '$domain' || host.endsWith('.$domain'))) {
    if (opts && opts.all) return process.nextTick(cb, null, [{ address: '127.0.0.1', family: 4 }])
    return process.nextTick(cb, null, '127.0.0.1', 4)
  }
  return lookup.call(this, host, opts, cb)
}
JS
	serveargs+=(--e2b-domain "$domain:$port" --e2b-tls-cert "$out/tls.pem" --e2b-tls-key "$out/tls.key")
	clientenv=(E2B_DOMAIN="$domain:$port" NODE_EXTRA_CA_CERTS="$out/tls.pem" NODE_OPTIONS="--require $out/wildcard-dns.cjs")
else
	serveargs+=(--e2b-domain e2b.airlock.test)
	clientenv=(E2B_API_URL="http://127.0.0.1:$port" E2B_SANDBOX_URL="http://127.0.0.1:$port")
fi
"$bin" serve --socket "$out/airlock.sock" --data "$data" "${serveargs[@]}" >"$out/serve.log" 2>&1 &
serve=$!
trap 'kill -INT $serve 2>/dev/null; wait $serve 2>/dev/null || true' EXIT
for _ in $(seq 200); do
	(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
	sleep 0.1
done
key=$("$bin" serve key create --tenant e2bsuite --data "$data" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["e2b_key"])')

cd "$sdk"
status=0
env "${clientenv[@]}" E2B_API_KEY="$key" \
	npx vitest run --project unit --reporter=default --reporter=json --outputFile="$out/results.json" \
	"${@:-tests/sandbox}" >"$out/vitest.log" 2>&1 || status=$?
python3 - "$out/results.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for f in d["testResults"]:
    for t in f["assertionResults"]:
        if t["status"] != "passed":
            print(f'{t["status"]:7} {f["name"].split("tests/sandbox/")[-1]} > {t["fullName"]}')
print(f'passed {d["numPassedTests"]} of {d["numTotalTests"]} (failed {d["numFailedTests"]}, skipped {d["numPendingTests"]})')
PY
echo "logs: $out (vitest.log, serve.log, results.json)"
