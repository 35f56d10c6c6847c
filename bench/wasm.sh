#!/usr/bin/env bash
# The wasm backend end to end beside its peer, in one hyperfine run:
#   airlock run --backend wasm -- ./hello.wasm   (policy, create, exec, destroy)
#   wasmbare ./hello.wasm                         (bare wazero: cache, WASI, run)
# hello.wasm is the tiny hand-encoded WASI command of backend/wasm/wasmtest;
# both sides load its compiled code from their on-disk compilation cache.
# Target: ratio of the medians <= 1.2. Prints the ratio; hyperfine's JSON
# lands in out/bench/wasm.json. N sets the runs per command (default 200).
# The in-process figure (instantiate + run of the cached module, target p50
# under 1 ms) is `go test -run '^$' -bench ExecCached ./backend/wasm`.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-200}
command -v hyperfine >/dev/null || { echo "bench/wasm.sh: hyperfine not installed (apt-get install hyperfine)" >&2; exit 1; }
mkdir -p out/bench
[ -x bin/airlock ] || make build >/dev/null
go build -trimpath -o out/bench/wasmbare ./bench/wasmbare
bin=$PWD/bin/airlock
out=$PWD/out/bench
work=$(mktemp -d /tmp/airlock-bench-wasm.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work" # the workspace of `airlock run` and wasmbare's preopen
"$out/wasmbare" -write-hello hello.wasm
hyperfine -N --warmup 10 --runs "$N" --export-json "$out/wasm.json" \
	-n airlock "$bin run --backend wasm -- ./hello.wasm" \
	-n wasmbare "$out/wasmbare ./hello.wasm"
python3 - "$out/wasm.json" <<'PY'
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
a, b = r["airlock"]["median"] * 1e3, r["wasmbare"]["median"] * 1e3
print(f"wasm: airlock median {a:.2f} ms, bare wazero median {b:.2f} ms, ratio {a/b:.2f} (target <= 1.2)")
PY
