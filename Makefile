# Airlock. `make demo` runs the main job, `make test` passes the tests
# (installing what they need first). See README.md.
GO        ?= go
export CGO_ENABLED = 0
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
BIN       := bin/airlock
GOFLAGS_BUILD := -trimpath -ldflags "-s -w -X main.version=$(VERSION)"
# Fuzz time per target in `make test` (CI keeps it brief).
FUZZTIME  ?= 5s

.PHONY: all build deps test unit fuzz demo bench escape clean sdk-test
.PHONY: wasm-assets

all: build

build:
	$(GO) build $(GOFLAGS_BUILD) -o $(BIN) ./cmd/airlock

deps:
	./scripts/deps.sh
	./scripts/wasm-assets.sh

# The whole test run: deps, vet, unit+integration tests, brief fuzzing.
test: deps build
	$(GO) vet ./...
	AIRLOCK_BIN=$(CURDIR)/$(BIN) $(GO) test -count=1 -timeout 20m ./...
	$(MAKE) sdk-test
	$(MAKE) fuzz

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
	AIRLOCK_BIN=$(CURDIR)/$(BIN) AIRLOCK_SCORECARD=$(CURDIR)/docs/escape-scorecard $(GO) test -count=1 -timeout 30m ./test/escape -run TestEscape -v

# WASI interpreter builds for the wasm backend (ruby), checksum-verified,
# into var/wasm (or $AIRLOCK_WASM_DIR). Idempotent; part of deps.
wasm-assets:
	./scripts/wasm-assets.sh

clean:
	rm -rf bin
