#!/usr/bin/env bash
# Installs (idempotently, quickly when already there) what the tests need:
# Debian packages, Go modules. Runs as root in CI; elsewhere it installs what
# it can and says what it could not.
set -euo pipefail
cd "$(dirname "$0")/.."

# The Kubernetes v1.37.2 binaries of test/kube's cluster (tools/kube; about
# 8 min cold on 2 cores, cached per machine, instant when there): built in
# the background while the rest, mostly downloads, goes on (first of all,
# before the Debian packages: it needs only Go and the module proxy, and on a
# fresh machine it is the longest step); waited for at the end.
kube_log=$(mktemp /tmp/airlock-kube-build.XXXXXX)
./scripts/kube.sh >"$kube_log" 2>&1 &
kube_pid=$!
# gVisor's runsc and containerd-shim-runsc-v1, pinned (scripts/runsc.sh;
# about 10 min cold, cached per machine), built beside the Kubernetes
# binaries; waited for at the end, after them.
runsc_log=$(mktemp /tmp/airlock-runsc-build.XXXXXX)
./scripts/runsc.sh >"$runsc_log" 2>&1 &
runsc_pid=$!

# gcc: the race detector needs cgo (make race).
# python3-matplotlib: run_code's PNG figures are tested inside sandboxes;
# python3-pip: the Python SDK's install test.
# e2fsprogs: mkfs.ext4, for airlock serve's disk quota volumes (Debian
# installs it everywhere; listed so a slimmer image cannot skip them).
# qemu-system-x86, xz-utils: the microvm backend (QEMU -M microvm; the guest
# kernel's extraction, scripts/guest-kernel.sh).
# runsc is built from the Go module proxy below (scripts/runsc.sh); Debian's
# (0.0~20221219) is installed only when that build fails.
pkgs=(bubblewrap git qemu-system-x86 xz-utils python3 python3-matplotlib python3-pip curl iproute2 hyperfine gcc libc6-dev e2fsprogs)
# uidmap: the setuid newuidmap and newgidmap, which map a normal user's
# /etc/subuid and /etc/subgid range into `airlock run --image` sandboxes.
pkgs+=(uidmap)
# docker.io: the docker backend's daemon (scripts/dockerd.sh starts it);
# busybox-static and mmdebstrap: the test images (scripts/docker-images.sh).
# The OCI runtime's tests: containerd (and its runc shim) and a dockerd of
# their own, runc beside airlock, Debian's loopback CNI plugin.
pkgs+=(docker.io busybox-static mmdebstrap containerd runc containernetworking-plugins)
# The Kubernetes cluster's tests (test/kube): Debian's etcd 3.4, and nft
# (the harness deletes the nf tables the kubelet's iptables calls made).
pkgs+=(etcd-server nftables)
# The web console's browser tests (ui/e2e): Debian's chromium, driven
# headless by playwright-core, and a font so pages render text.
pkgs+=(chromium fonts-dejavu-core)
# The TypeScript SDK needs Node.js 20+ and npm (machines come with them;
# Debian's own nodejs is older, so it is only a fallback).
command -v node >/dev/null || pkgs+=(nodejs npm)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	if [ "$(id -u)" = 0 ]; then
		echo "deps: installing ${missing[*]}"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -q >/dev/null
		apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
	else
		echo "deps: not root, cannot install: ${missing[*]} (tests needing them skip)" >&2
	fi
fi

# The docker backend's tests need a daemon: start one unless one answers.
if [ "$(id -u)" = 0 ]; then
	./scripts/dockerd.sh
fi

go mod download

# staticcheck (make lint), pinned; installed again only when the version
# differs.
staticcheck_version=v0.8.2
sc="$(go env GOPATH)/bin/staticcheck"
if ! "$sc" -version 2>/dev/null | grep -q "(${staticcheck_version#v})"; then
	echo "deps: installing staticcheck $staticcheck_version"
	CGO_ENABLED=0 go install "honnef.co/go/tools/cmd/staticcheck@$staticcheck_version"
fi
# crictl (the OCI runtime's containerd tests drive CRI with it), pinned.
crictl_version=v1.34.0
if ! go version -m "$(go env GOPATH)/bin/crictl" 2>/dev/null | grep -q "mod.*sigs.k8s.io/cri-tools.*$crictl_version"; then
	echo "deps: installing crictl $crictl_version"
	CGO_ENABLED=0 go install "sigs.k8s.io/cri-tools/cmd/crictl@$crictl_version"
fi
# The TypeScript SDK's build tools (typescript, @types/node) from its
# committed lock file; skipped when node_modules matches it.
if [ ! sdk/typescript/node_modules/.package-lock.json -nt sdk/typescript/package-lock.json ]; then
	(cd sdk/typescript && npm ci --no-audit --no-fund --loglevel=error)
fi
# The web console's build (esbuild, preact) and browser-test tools
# (playwright-core, axe-core) from ui/'s committed lock file.
if [ ! ui/node_modules/.package-lock.json -nt ui/package-lock.json ]; then
	(cd ui && npm ci --no-audit --no-fund --loglevel=error)
fi
# E2B's published SDKs (e2b, @e2b/code-interpreter) for test/e2b, which
# runs our own tests with them against airlock serve --e2b-listen.
if [ ! test/e2b/node_modules/.package-lock.json -nt test/e2b/package-lock.json ]; then
	(cd test/e2b && npm ci --no-audit --no-fund --loglevel=error)
fi
# The Debian test images of the image store's tests and E2B's templates
# (base, code-interpreter-v1) as tarballs, cached per machine (`make
# e2b-templates` imports the templates into the default image store). Both
# are mostly downloads and unpacking, so they are built side by side.
./scripts/test-images.sh &
images_pid=$!
./scripts/e2b-templates.sh build
if ! wait "$images_pid"; then
	echo "deps: building the test images failed (scripts/test-images.sh)" >&2
	exit 1
fi
if ! wait "$kube_pid"; then
	cat "$kube_log" >&2
	rm -f "$kube_log"
	echo "deps: building the Kubernetes binaries failed (scripts/kube.sh)" >&2
	exit 1
fi
grep -v '^/' "$kube_log" >&2 || true # its messages, not the directory it prints
rm -f "$kube_log"
if wait "$runsc_pid"; then
	dir=$(grep '^/' "$runsc_log" | tail -1)
	grep -v '^/' "$runsc_log" >&2 || true
	if [ "$(id -u)" = 0 ]; then
		# First on PATH, before Debian's /usr/bin/runsc. Only our own links
		# (or nothing) are replaced: a runsc installed there by hand stays.
		for b in runsc containerd-shim-runsc-v1; do
			l=/usr/local/bin/$b
			if [ -e "$l" ] && ! { [ -L "$l" ] && [[ "$(readlink "$l")" == "${AIRLOCK_RUNSC_DIR:-/var/cache/airlock-runsc}"/* ]]; }; then
				echo "deps: $l exists and is not ours: left as it is (the gvisor backend uses the first runsc on PATH)" >&2
				continue
			fi
			ln -sfn "$dir/$b" "$l"
		done
	fi
else
	cat "$runsc_log" >&2
	echo "deps: building runsc failed (scripts/runsc.sh): falling back to Debian's runsc 0.0~20221219 (ptrace only, no containerd shim)" >&2
	if [ "$(id -u)" = 0 ] && ! dpkg-query -W -f='${Status}' runsc 2>/dev/null | grep -q "install ok installed"; then
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends runsc >/dev/null
	fi
fi
rm -f "$runsc_log"
