# tebis-go: `make run` sets up a fresh Debian machine, builds, and runs the
# demo; `make test` runs vet and the race-enabled test suite.
GO ?= go
BIN := bin/tebis
export PATH := $(PATH):/usr/local/go/bin

.PHONY: build test bench run deps fmt vet fuzz

deps:
	@command -v $(GO) >/dev/null || { echo "go toolchain not found (install Go 1.26)"; exit 1; }
	$(GO) mod download

build: deps
	$(GO) build -o $(BIN) ./cmd/tebis

vet:
	$(GO) vet ./...

test: deps vet
	$(GO) test -race -timeout 25m ./...

# Short fuzzing of the on-disk format decoders (not part of `make test`;
# `make test` runs the fuzz targets' seed corpora).
fuzz:
	$(GO) test ./engine -run '^$$' -fuzz FuzzDecodeNode -fuzztime 30s
	$(GO) test ./engine -run '^$$' -fuzz FuzzDecodeRecord -fuzztime 30s
	$(GO) test ./engine -run '^$$' -fuzz FuzzDecodeSegHeader -fuzztime 30s

bench: build
	$(BIN) bench engine --mix SD
	$(BIN) bench engine --mix M
	$(BIN) bench engine --mix L
	$(BIN) bench engine --mix LD

run: build
	$(BIN) demo --dir .run/demo
