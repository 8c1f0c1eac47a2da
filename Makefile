# make run   - the demo: podium-sim places deploy/examples/edge-cluster.yaml with
#              podium-scheduler and podium-plugin-host spawned as child processes
# make test  - every unit and integration test, through ctest
# make bench - scheduler_perf-shaped benchmarks, results in build/bench/results.json
# Each target installs what is missing (Debian packages) and builds what is stale.

BUILD     ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS      ?= $(shell nproc)
CTEST_ARGS ?=

DEB_PACKAGES := build-essential cmake pkg-config \
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler \
  libabsl-dev libboost1.81-dev libboost-json1.81-dev prometheus-cpp-dev \
  libyaml-cpp-dev libgtest-dev libgmock-dev libbenchmark-dev \
  python3-grpcio python3-protobuf python3-yaml libssl-dev kubectl

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
DEPS_STAMP := $(BUILD)/.deps-installed

.PHONY: all deps configure build run test bench clean

all: build

# Installs only the packages dpkg does not already report as installed.
$(DEPS_STAMP):
	@missing=""; for p in $(DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "Installing:$$missing"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q --no-install-recommends $$missing; \
	fi
	@mkdir -p $(BUILD) && touch $@

deps: $(DEPS_STAMP)

$(BUILD)/CMakeCache.txt: $(DEPS_STAMP) CMakeLists.txt
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)

configure: $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j$(JOBS)

run: build
	$(BUILD)/adapters/simulator/podium-sim --spawn \
	  --config deploy/config/scheduler.yaml \
	  --cluster deploy/examples/edge-cluster.yaml

test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS) $(CTEST_ARGS)

bench: build
	integration/bench/run_bench.sh $(BUILD)

clean:
	rm -rf $(BUILD)
