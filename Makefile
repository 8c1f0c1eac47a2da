# make run   - the demo: podium-sim places deploy/examples/edge-cluster.yaml with
#              podium-scheduler and podium-plugin-host spawned as child processes
# make test  - every unit and integration test, through ctest
# make bench - scheduler_perf-shaped benchmarks, results in build/bench/results.json
# make tsan  - the scheduler's and the SDK's unit tests under ThreadSanitizer
#              (a separate build in build-tsan; suppressions in tsan.supp)
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

TSAN_BUILD ?= build-tsan
# The scheduler's and the SDK's unit tests.
TSAN_TARGETS := podium_server_test podium_queue_test podium_cache_test podium_config_test \
  podium_framework_test podium_remote_test podium_scheduler_test \
  podium_sdk_framework_test podium_sdk_mirror_test podium_sdk_runtime_test

.PHONY: all deps configure build run test bench tsan clean

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

# Only races inside gRPC, Abseil and protobuf are suppressed (tsan.supp); a
# report in our code fails the test.
tsan: deps
	cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPODIUM_TSAN=ON
	cmake --build $(TSAN_BUILD) -j$(JOBS) --target $(TSAN_TARGETS)
	TSAN_OPTIONS="suppressions=$(CURDIR)/tsan.supp halt_on_error=1 second_deadlock_stack=1" \
	  ctest --test-dir $(TSAN_BUILD)/services/scheduler --output-on-failure -j$(JOBS) $(CTEST_ARGS)
	TSAN_OPTIONS="suppressions=$(CURDIR)/tsan.supp halt_on_error=1 second_deadlock_stack=1" \
	  ctest --test-dir $(TSAN_BUILD)/plugin-sdk --output-on-failure -j$(JOBS) $(CTEST_ARGS)

clean:
	rm -rf $(BUILD) $(TSAN_BUILD)
