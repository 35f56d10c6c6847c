#!/usr/bin/env bash
# Fetches the WASI interpreter builds the wasm backend runs as commands
# (`ruby`) from the npm registry, verifies them against the checksums pinned
# below and installs them in $AIRLOCK_WASM_DIR (default: var/wasm in the
# repository, which the backend finds beside bin/airlock). Idempotent: when
# the installed file already has the pinned checksum it does nothing.
# Airlock never downloads anything at run time; this is the only fetch.
#
# To move to a new release: `npm view @ruby/3.4-wasm-wasi versions`, then
# update VERSION and both checksums (tarball and the extracted file).
set -euo pipefail
cd "$(dirname "$0")/.."

dest=${AIRLOCK_WASM_DIR:-var/wasm}

# name | npm package | version | sha256 of the npm tarball | file in the tarball | sha256 of that file
assets=(
	"ruby|@ruby/3.4-wasm-wasi|2.10.1|2e709bd9eddefe1c5d63e9fc0391a35cce4754e936d8a2f24b8582f6d5c2ea88|package/dist/ruby+stdlib.wasm|4b814fc9d13505ea5b4c1f3bd3a7cc7ccca137f551196b9b21f0a7caf9cc5878"
)

sha256() { sha256sum "$1" | cut -d' ' -f1; }

need_npm() {
	command -v npm >/dev/null && return
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		echo "wasm-assets: installing npm"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -q >/dev/null
		apt-get install -y -q --no-install-recommends npm >/dev/null
	else
		echo "wasm-assets: npm is needed to fetch the interpreter builds (apt-get install npm)" >&2
		exit 1
	fi
}

mkdir -p "$dest"
for a in "${assets[@]}"; do
	IFS='|' read -r name pkg version tgz_sum file file_sum <<<"$a"
	out="$dest/$name.wasm"
	if [ -f "$out" ] && [ "$(sha256 "$out")" = "$file_sum" ]; then
		echo "wasm-assets: $name ($pkg@$version) up to date in $dest"
		continue
	fi
	need_npm
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	echo "wasm-assets: fetching $pkg@$version"
	tgz=$(cd "$tmp" && npm pack --silent --ignore-scripts "$pkg@$version" | tail -n1)
	got=$(sha256 "$tmp/$tgz")
	if [ "$got" != "$tgz_sum" ]; then
		echo "wasm-assets: $pkg@$version tarball checksum mismatch: got $got, want $tgz_sum" >&2
		exit 1
	fi
	tar -xzf "$tmp/$tgz" -C "$tmp" "$file" package/dist/LICENSE package/dist/NOTICE
	got=$(sha256 "$tmp/$file")
	if [ "$got" != "$file_sum" ]; then
		echo "wasm-assets: $file checksum mismatch: got $got, want $file_sum" >&2
		exit 1
	fi
	cp "$tmp/package/dist/LICENSE" "$dest/$name.LICENSE"
	cp "$tmp/package/dist/NOTICE" "$dest/$name.NOTICE"
	echo "$pkg@$version $file sha256:$file_sum" >"$dest/$name.source"
	mv "$tmp/$file" "$out.part"
	mv "$out.part" "$out"
	rm -rf "$tmp"
	trap - EXIT
	echo "wasm-assets: installed $out"
done
