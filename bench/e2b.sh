#!/usr/bin/env bash
# Sandbox.create() + commands.run('true') p50 through the E2B door beside
# the same through /v1 (warm pool, and the E2B door's own request shape),
# alternating in one run, each from a full warm pool (--pool for /v1's
# profile, --pool-template for E2B's template base): bench/e2b/bench.mjs. Needs root, the `base` image
# in a store (scripts/e2b-suite.sh caches one: base-image.tar) and E2B's
# SDK in test/e2b/node_modules (npm ci there).   N=20 bench/e2b.sh
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
bin=${AIRLOCK_BIN:-$repo/bin/airlock}
image=${E2B_BASE_IMAGE:-/var/cache/airlock-e2b-suite/base-image.tar}
dir=$(mktemp -d /tmp/e2b-bench.XXXXXX)
AIRLOCK_IMAGE_STORE=$dir/data/images "$bin" image import -q "$image" >/dev/null
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
e2b=$(port) v1=$(port)
"$bin" serve --socket "$dir/sock" --data "$dir/data" --listen "127.0.0.1:$v1" --e2b-listen "127.0.0.1:$e2b" \
	--pool native/default="${POOL:-4}" --pool-template base="${POOL:-4}" >"$dir/serve.log" 2>&1 &
serve=$!
trap 'kill -INT $serve; wait $serve || true; rm -rf "$dir"' EXIT
for _ in $(seq 200); do (exec 3<>"/dev/tcp/127.0.0.1/$e2b") 2>/dev/null && break; sleep 0.1; done
keys=$("$bin" serve key create --tenant bench --data "$dir/data" --json)
key=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["key"])' "$keys")
ekey=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["e2b_key"])' "$keys")
cd "$repo/test/e2b"
AIRLOCK_SOCKET=$dir/sock POOLED=$((2 * ${POOL:-4})) AIRLOCK_URL=http://127.0.0.1:$v1 AIRLOCK_KEY=$key E2B_API_URL=http://127.0.0.1:$e2b E2B_SANDBOX_URL=http://127.0.0.1:$e2b \
	E2B_API_KEY=$ekey node "$repo/bench/e2b/bench.mjs"
