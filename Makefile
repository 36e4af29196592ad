# tebis-go: `make run` sets up a fresh Debian machine, builds, and runs the
# demo; `make test` runs vet and the race-enabled test suite.
GO ?= go
BIN := bin/tebis
export PATH := $(PATH):/usr/local/go/bin

.PHONY: build test bench bench-replication bench-curves bench-failover run deps vet fuzz torture torture-matrix

# ZooKeeper (tests and the demo run a real one, see internal/zkserver) comes
# from the Debian zookeeper package, and the browser the status page's test
# drives (cmd/tebis, chromedp) from the chromium package; each is installed
# only if missing, apt-get update only if the install fails.
deps:
	@command -v $(GO) >/dev/null || { echo "go toolchain not found (install Go 1.26)"; exit 1; }
	$(GO) mod download
	@if ! test -f /usr/share/java/zookeeper.jar || ! command -v java >/dev/null; then \
		SUDO=; if [ "$$(id -u)" != 0 ] && command -v sudo >/dev/null; then SUDO=sudo; fi; \
		echo "installing the zookeeper package"; \
		APT="$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get"; \
		$$APT install -y zookeeper || { $$APT update && $$APT install -y zookeeper; } || \
			{ echo "could not install zookeeper (apt-get install -y zookeeper)"; exit 1; }; \
	fi
	@if ! command -v chromium >/dev/null; then \
		SUDO=; if [ "$$(id -u)" != 0 ] && command -v sudo >/dev/null; then SUDO=sudo; fi; \
		echo "installing the chromium package"; \
		APT="$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get"; \
		$$APT install -y chromium || { $$APT update && $$APT install -y chromium; } || \
			{ echo "could not install chromium (apt-get install -y chromium)"; exit 1; }; \
	fi

build: deps
	$(GO) build -o $(BIN) ./cmd/tebis

vet:
	$(GO) vet ./...

test: deps vet
	$(GO) test -race -timeout 25m ./...
	# Allocation bounds, checked without the race detector's instrumentation.
	$(GO) test ./client -run 'Allocations|StatusErr' -count 1
	# A short fuzz run of the wire decoders (seed corpora run above). Budgets are
	# execution counts: Go 1.26's fuzz coordinator can fail a duration budget with
	# a spurious "context deadline exceeded" when it expires (golang/go#75804).
	$(GO) test ./rdma/ring -run '^$$' -fuzz FuzzServerPoll -fuzztime 400000x
	$(GO) test ./rdma/ring -run '^$$' -fuzz FuzzDecodeHeader -fuzztime 200000x
	$(GO) test ./internal/replwire -run '^$$' -fuzz FuzzDecodeCommand -fuzztime 50000x

# Jepsen-style runs of `tebis torture` (a seeded schedule of kills, pauses,
# partitions, slow and lossy links against a cluster in network namespaces,
# with checked register and set workloads; `make test` runs one covering
# every nemesis once): seeds TORTURE_SEED, TORTURE_SEED+1, ... of
# TORTURE_RUN of faults each, until TORTURE_DURATION has passed, summed up
# at the end. Each run's report, plot and (on a violation) artifacts go to
# TORTURE_ARTIFACTS/seed-N; TORTURE_ARGS adds flags (`bin/tebis torture
# --help`). See docs/reliability.md.
TORTURE_DURATION ?= 30m
TORTURE_RUN ?= 5m
TORTURE_SEED ?= 0
TORTURE_ARTIFACTS ?= .run/torture
TORTURE_ARGS ?=
torture: build
	mkdir -p $(TORTURE_ARTIFACTS)
	{ $(BIN) --log-level warn torture --dir $(TORTURE_ARTIFACTS) --total $(TORTURE_DURATION) --duration $(TORTURE_RUN) \
		--seed $(TORTURE_SEED) $(TORTURE_ARGS) 2>&1; echo $$? > $(TORTURE_ARTIFACTS)/rc; } | tee -i $(TORTURE_ARTIFACTS)/torture.log; \
	exit $$(cat $(TORTURE_ARTIFACTS)/rc)

# The linearizability fault matrix (region.TestE2ELinearizable; `make test`
# runs a seeded sample of 2 configurations) for as long as asked:
# configurations of the matrix (TORTURE_CONFIGS: all, or names/patterns such
# as async-*-tcp-2) one after another, TORTURE_RUN of checked history each,
# until TORTURE_DURATION has passed. TORTURE_SEED replays a run; a
# violation's history visualization and process logs go under
# TORTURE_ARTIFACTS.
TORTURE_CONFIGS ?= all
TORTURE_L0 ?= 4096
TORTURE_FAULTS ?=
TORTURE_TIMEOUT ?= 24h
torture-matrix: deps
	mkdir -p $(TORTURE_ARTIFACTS)
	TEBIS_LIN_TOTAL=$(TORTURE_DURATION) TEBIS_LIN_DURATION=$(TORTURE_RUN) TEBIS_LIN_CONFIGS='$(TORTURE_CONFIGS)' \
	TEBIS_SEED=$(TORTURE_SEED) TEBIS_LIN_ARTIFACTS=$(abspath $(TORTURE_ARTIFACTS)) TEBIS_LIN_L0=$(TORTURE_L0) TEBIS_LIN_UNSAFE=1 TEBIS_LIN_FAULTS=$(TORTURE_FAULTS) \
		$(GO) test ./region -run '^TestE2ELinearizable$$' -count=1 -v -timeout $(TORTURE_TIMEOUT) > $(TORTURE_ARTIFACTS)/matrix.log 2>&1; \
	rc=$$?; grep -E 'seed|cluster ready|fault [0-9]|porcupine|operations checked|violation|liveness|artifacts|summary|^ +[a-z]+-[a-z]+-|--- |^ok|^FAIL' $(TORTURE_ARTIFACTS)/matrix.log; \
	echo "full output: $(TORTURE_ARTIFACTS)/matrix.log"; exit $$rc

# Longer fuzzing of the on-disk format and wire decoders (not part of `make test`;
# `make test` runs the fuzz targets' seed corpora).
fuzz:
	for f in FuzzDecodeNode FuzzDecodeRecord FuzzDecodeSegHeader FuzzDecodeLevelDesc FuzzMergeRequestTable; do \
		$(GO) test ./engine -run '^$$' -fuzz $$f -fuzztime 1000000x -fuzzminimizetime 2s || exit 1; \
	done
	for f in FuzzDecodeHello FuzzDecodeFrame; do \
		$(GO) test ./rdma -run '^$$' -fuzz $$f -fuzztime 1000000x || exit 1; \
	done
	for f in FuzzServerPoll FuzzDecodeHeader FuzzConnParams FuzzClientCheck; do \
		$(GO) test ./rdma/ring -run '^$$' -fuzz $$f -fuzztime 1000000x || exit 1; \
	done
	$(GO) test ./internal/wire -run '^$$' -fuzz FuzzDecode -fuzztime 1000000x
	for f in FuzzDecodeSegMap FuzzDecodeCommand FuzzDecodeHello FuzzDecodeState FuzzDecodeRebase FuzzDecodeBuildData FuzzDecodeMarker; do \
		$(GO) test ./internal/replwire -run '^$$' -fuzz "^$$f\$$" -fuzztime 1000000x || exit 1; \
	done
	for f in FuzzParseReport FuzzParseRequests FuzzDecodeMap FuzzDecodeServerInfo FuzzDecodeHealth; do \
		$(GO) test ./internal/coord -run '^$$' -fuzz "^$$f\$$" -fuzztime 200000x || exit 1; \
	done

# The engine against pebble, one process, the paper's KV-size mixes
# (docs/benchmarks.md has the latest figures). BENCH_DIR should be on the
# disk being measured.
BENCH_DIR ?= .run/bench
BENCH_FLAGS ?= --recordcount 1000000 --operationcount 200000 --threads 16 --seed 11
bench: build
	mkdir -p $(BENCH_DIR)
	for mix in SD M L LD; do \
		$(BIN) bench engine --kv-sizes $$mix --dir $(BENCH_DIR) $(BENCH_FLAGS) --json $(BENCH_DIR)/$$mix.json || exit 1; \
	done
	$(MAKE) bench-replication

# The paper's replication experiment: 3 server processes, no replication,
# Build-Index and Send-Index, 2- and 3-way, SD Load A then Run A.
REPL_FLAGS ?= --recordcount 3000000 --operationcount 1000000 --threads 16 --seed 11
bench-replication: build
	mkdir -p $(BENCH_DIR)
	$(BIN) bench replication --dir $(BENCH_DIR) $(REPL_FLAGS) --json $(BENCH_DIR)/replication.json

# Cost as the work grows: 3-way Send-Index through 3 server processes,
# records (1M, 3M, 10M), regions per server (3, 24, 96) and client
# goroutines (1-64) varied one at a time; curves.json and one PNG per
# parameter in $(BENCH_DIR)/curves. CURVES_FLAGS scales the axes down
# (e.g. --records 100000,300000 --regions 3,24 --threads 1,16).
CURVES_FLAGS ?= --operationcount 1000000 --seed 11
bench-curves: build
	mkdir -p $(BENCH_DIR)
	$(BIN) bench curves --dir $(BENCH_DIR) --out $(BENCH_DIR)/curves $(CURVES_FLAGS)

# Failover time: SIGKILL of a region's primary, repeated (the killed server
# restarts and is re-seeded between rounds); docs/benchmarks.md.
FAILOVER_ROUNDS ?= 10
ZK_SESSION ?= 2s
FAILOVER_SERVER_ARGS ?=
bench-failover: deps
	TEBIS_FAILOVER_ROUNDS=$(FAILOVER_ROUNDS) TEBIS_ZK_SESSION=$(ZK_SESSION) TEBIS_FAILOVER_SERVER_ARGS="$(FAILOVER_SERVER_ARGS)" $(GO) test ./region -run TestE2ERepeatedFailover -count=1 -v -timeout 30m | grep -E 'round|failover times|PASS|FAIL|ok'

# A local replicated cluster: ZooKeeper, a master and 3 region servers, each a
# process (shm), 3 regions with 3 replicas, a short YCSB Load A + Run A through
# the client; then it serves until Ctrl-C (DEMO_FLAGS=--exit stops it after the workload;
# `bin/tebis demo --help` lists the flags). Logs and data: .run/demo/cluster.
# Its servers listen on loopback and unix sockets only, without TLS (it says
# so when it starts); docs/operations.md, "TLS and peer authentication".
DEMO_FLAGS ?=
run: build
	$(BIN) demo --cluster --dir .run/demo $(DEMO_FLAGS)
