# The two entry points a new user types (see README.md):
#   make demo   install what is missing, build, start a local 3-node cluster
#   make test   install what is missing, build, run the whole test suite
BUILD ?= build
JOBS ?= $(shell nproc)
# Integration tests mostly wait on etcd timers, so run more of them than there are cores.
TEST_JOBS ?= 4

.PHONY: all deps build demo test unit-test deb sim faults bench bench-quick bench-build clean
all: build

deps:
	./scripts/install-deps.sh

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	./scripts/demo.sh

test: build
	./scripts/install-deps.sh --test
	cd $(BUILD) && ctest --output-on-failure -j $(TEST_JOBS) --timeout 600

unit-test: build
	./scripts/install-deps.sh --test
	cd $(BUILD) && ctest --output-on-failure -L unit

# The Debian package (docs/packaging.md): $(BUILD)/etcd-steward_<version>-1_<arch>.deb, from
# the build; STEWARD_DEB_VERSION=<upstream> builds another version.
deb: build
	./scripts/build-deb.sh $(BUILD) $(BUILD)

# The deterministic simulation: SEEDS seeds from SEED on, STEPS steps each (docs/simulation.md).
SEEDS ?= 20
STEPS ?= 5000
SEED ?= 1
sim: build
	$(BUILD)/steward_sim --seeds $(SEEDS) --steps $(STEPS) --seed $(SEED) $(SIM_ARGS)

# The fault suite's long mode (tests/faults/, docs/reliability.md): CYCLES random faults from
# SEED on NODES agents (SIZE voters, the rest spares), backing up to a STORE (file or s3).
CYCLES ?= 20
NODES ?= 4
SIZE ?= 3
STORE ?= file
# UPGRADE=1: roll the cluster from etcd 3.4 to 3.5 first, then run the faults on 3.5.
UPGRADE ?= 0
faults: build
	./scripts/install-deps.sh --test
	STEWARD_FAULT_SEED=$(SEED) STEWARD_FAULT_CYCLES=$(CYCLES) STEWARD_FAULT_NODES=$(NODES) \
	  STEWARD_FAULT_SIZE=$(SIZE) STEWARD_FAULT_STORE=$(STORE) STEWARD_FAULT_UPGRADE=$(UPGRADE) \
	  $(BUILD)/fault_tests --gtest_also_run_disabled_tests --gtest_filter=FaultSuite.DISABLED_Random

# The benchmarks (docs/benchmarks.md): every bench/ script, then bench/report writes
# docs/benchmarks.md and docs/bench/*.png from that run. RUNS=N (runs per procedure, default 5)
# and the scripts' other variables pass through. bench-quick is a smoke run (2 runs, small data)
# whose report stays in var/bench/quick/. Only what the scripts run is built.
BENCH_RESULTS ?= var/bench/results
bench: bench-build
	BUILD=$(BUILD) RESULTS_DIR=$(BENCH_RESULTS) RUNS=$(RUNS) ./bench/run

bench-quick: bench-build
	BUILD=$(BUILD) RESULTS_DIR=var/bench/quick RUNS=$(RUNS) QUICK=1 ./bench/run

bench-build:
	./scripts/install-deps.sh --bench
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(BUILD) --target steward stewardctl snapshot_probe member_restore put_load -j $(JOBS)
	BUILD=$(BUILD) ./bench/run --note-build

clean:
	rm -rf $(BUILD)
