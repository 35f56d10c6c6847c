# Airlock. `make demo` runs the main job, `make test` passes the tests
# (installing what they need first). See README.md.
GO        ?= go
export CGO_ENABLED = 0
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
BIN       := bin/airlock
# The build with the Kubernetes backend (serve --backend kubernetes): the
# default one, every sandbox's init and agent, links none of it.
KUBE_BIN  := bin/airlock-kube
GOFLAGS_BUILD := -trimpath -ldflags "-s -w -X main.version=$(VERSION)"
# Fuzz time per target in `make test` (CI keeps it brief).
FUZZTIME  ?= 5s
STATICCHECK ?= $(shell $(GO) env GOPATH)/bin/staticcheck
# Operating systems the module (the client side above all) must build for.
CROSS_GOOS := darwin windows freebsd
# Packages left out of -race, each with why:
#   test/escape (race only): the red-team suite; `make escape` and `make
#     test` run it, it is too slow under -race.
#   test/kube: a Kubernetes cluster of its own (~45 s); the plain run
#     covers it, a second cluster under -race is CI time for little.
#   test/e2b, ui/e2e, test/ocirt: what they test runs in other processes
#     (airlock serve driven by the E2B SDKs and by a browser; airlock as the
#     runtime dockerd and containerd start), built without -race: -race
#     would instrument only the harness, for a second run of minutes.
RACE_SKIP := /test/escape /test/kube /test/e2b /ui/e2e /test/ocirt
# Tests left out of -race (their package runs), each with why:
#   TestCPythonVsNative: CPython's regression modules run inside two
#     sandboxes; the Go side is Create, Exec and Wait, which the gVisor and
#     native tests run under -race anyway (as microvm's conformance run).
RACE_SKIP_TESTS := ^TestCPythonVsNative$$
# The slowest packages under -race, started first (see SLOW_FIRST).
RACE_FIRST := ./backend/microvm ./client ./backend/gvisor ./sandbox/sandboxtest ./backend/docker ./cmd/airlock
PKGS_NOT   = $(shell $(GO) list ./... | grep -v $(foreach p,$(1),-e '$(p)$$' -e '$(p)/'))

.PHONY: e2b-templates all build build-kube deps test unit lint cross race fuzz demo bench escape load clean sdk-test
.PHONY: wasm-assets docker-images guest-kernel

all: build

build:
	$(GO) build $(GOFLAGS_BUILD) -o $(BIN) ./cmd/airlock

# airlock-kube: airlock plus the Kubernetes backend (`airlock serve
# --backend kubernetes` runs it when it lies beside airlock).
build-kube:
	$(GO) build -tags kubernetes $(GOFLAGS_BUILD) -o $(KUBE_BIN) ./cmd/airlock

deps:
	./scripts/deps.sh
	./scripts/wasm-assets.sh
	./scripts/guest-kernel.sh

# The whole test run (what CI runs, through .ci/run): deps (which builds the
# Kubernetes binaries of test/kube's cluster, scripts/kube.sh), vet, staticcheck,
# the cross-OS build, unit+integration tests (the package-doc and host-path
# rules are tests in internal/lint; 30m: the escape suite on microvm runs
# under TCG, ~6 min of it on an idle 2-core machine), the race detector,
# brief fuzzing.
# Each phase says how long it took (scripts/phase.sh), and go test each
# package.
# go test's own vet pass is off in go-test and race (-vet=off): the vet phase
# runs every analyzer of go vet, a superset of go test's, over the same
# packages and their tests; a third pass only cost CPU.
# The slowest packages start first (go test runs packages in the order
# given, two at a time here): the escape suite alone takes ~15 min in CI, and
# started last it was the phase's tail. Its attacks on airlock serve are a
# package of their own (test/escape/serve), so they run beside TestEscape.
SLOW_FIRST = ./test/escape ./test/escape/serve ./test/e2b ./sandbox/sandboxtest ./test/kube ./client ./ui/e2e ./backend/microvm

test:
	@./scripts/phase.sh deps $(MAKE) deps
	@./scripts/phase.sh build $(MAKE) build build-kube docker-images
	@./scripts/phase.sh vet $(GO) vet ./...
	@./scripts/phase.sh lint $(MAKE) lint
	@./scripts/phase.sh cross $(MAKE) cross
	@./scripts/phase.sh go-test env GO=$(GO) AIRLOCK_BIN=$(CURDIR)/$(BIN) ./scripts/gotest.sh -vet=off -count=1 -timeout 40m $(SLOW_FIRST) ./...
	@./scripts/phase.sh race $(MAKE) race
	@./scripts/phase.sh sdk-test $(MAKE) sdk-test
	@./scripts/phase.sh fuzz $(MAKE) fuzz

lint:
	$(STATICCHECK) ./...

# STYLE.md rule 14: the module builds (tests included) on every OS.
cross:
	@for os in $(CROSS_GOOS); do \
		echo "GOOS=$$os go build ./... && go vet ./..."; \
		GOOS=$$os $(GO) build ./... && GOOS=$$os $(GO) vet ./... || exit 1; \
	done

# The race detector needs cgo (gcc, installed by deps). gotest.sh: the log
# names the slowest packages of this phase too.
race: build
	CGO_ENABLED=1 GO=$(GO) AIRLOCK_BIN=$(CURDIR)/$(BIN) ./scripts/gotest.sh -race -vet=off -skip '$(RACE_SKIP_TESTS)' -count=1 -timeout 30m $(RACE_FIRST) $(call PKGS_NOT,$(RACE_SKIP))

# The Python and TypeScript SDK suites, each against a real airlock serve it
# starts itself (README examples and examples/ included).
sdk-test: build
	cd sdk/typescript && npm run --silent build
	AIRLOCK_BIN=$(CURDIR)/$(BIN) python3 -m unittest discover -s sdk/python -t sdk/python
	cd sdk/typescript && AIRLOCK_BIN=$(CURDIR)/$(BIN) npm test --silent

fuzz:
	./scripts/fuzz.sh $(FUZZTIME)

demo: build
	./scripts/demo.sh

bench: build
	./scripts/bench.sh

escape: build
	AIRLOCK_BIN=$(CURDIR)/$(BIN) AIRLOCK_SCORECARD=$(CURDIR)/docs/escape-scorecard $(GO) test -count=1 -timeout 30m ./test/escape ./test/escape/serve -run 'TestEscape|TestServeAttacks' -v

# The server load test at full size (make test runs it with 100 sandboxes):
# 200 concurrent execs, 1,000 sandboxes created and destroyed, no leak.
load: build
	AIRLOCK_BIN=$(CURDIR)/$(BIN) AIRLOCK_LOAD_SANDBOXES=1000 $(GO) test -count=1 -timeout 30m ./test/escape/serve -run TestServeLoad -v

# The docker backend's images, built from Debian's packages (the browser
# image: headless Chromium). Skipped when unchanged; part of test.
docker-images:
	./scripts/docker-images.sh

# E2B's templates (base, code-interpreter-v1) built from Debian's packages
# and imported into the default image store ($$AIRLOCK_IMAGE_STORE, else
# airlock's own). Cached and idempotent; deps builds the tarballs.
e2b-templates: build
	./scripts/e2b-templates.sh all $(BIN)

# WASI interpreter builds for the wasm backend (ruby), checksum-verified,
# into var/wasm (or $AIRLOCK_WASM_DIR). Idempotent; part of deps.
wasm-assets:
	./scripts/wasm-assets.sh

# The microvm backend's guest kernel (Debian's linux-image, pinned and
# checksum-verified) into var/microvm/kernel. Idempotent; part of deps.
guest-kernel:
	./scripts/guest-kernel.sh

clean:
	rm -rf bin
