# make run   - the demo: podium-sim places deploy/examples/edge-cluster.yaml with
#              podium-scheduler and podium-plugin-host spawned as child processes
# make test  - every unit and integration test, through ctest
# make bench - scheduler_perf-shaped benchmarks, results in build/bench/results.json
# make tsan  - the scheduler's and the SDK's unit tests under ThreadSanitizer
#              (a separate build in build-tsan; suppressions in tsan.supp)
# make asan  - every test under ASan + UBSan (a separate build in build-asan); a leak
#              or a UBSan report fails its test
# make fuzz  - libFuzzer on the YAML loaders and the k8s adapter's JSON path (clang, build-fuzz/), FUZZ_SECONDS each;
#              new inputs are added to adapters/common/fuzz/corpus/ (replayed by make test)
# Each target installs what is missing (Debian packages) and builds what is stale.

BUILD     ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS      ?= $(shell nproc)
CTEST_ARGS ?=

DEB_PACKAGES := build-essential cmake pkg-config \
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler \
  libabsl-dev libboost1.81-dev libboost-json1.81-dev prometheus-cpp-dev \
  libyaml-cpp-dev libgtest-dev libgmock-dev libbenchmark-dev \
  python3-grpcio python3-protobuf python3-yaml libssl-dev kubectl \
  curl patch xz-utils libtcmalloc-minimal4

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
DEPS_STAMP := $(BUILD)/.deps-installed

TSAN_BUILD ?= build-tsan
ASAN_BUILD ?= build-asan

FUZZ_BUILD   ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZERS      := cluster_loader scheduler_config kube_json
FUZZ_CORPUS  := adapters/common/fuzz/corpus

.PHONY: all deps configure build run test bench tsan asan fuzz clean

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

# Abseil comes from tools/tsan/build-absl.sh: Debian's own source, built with
# -fsanitize=thread into $(TSAN_ABSL) and put first on LD_LIBRARY_PATH, so our
# code and gRPC lock through an absl::Mutex TSan sees. Only accesses inside
# uninstrumented gRPC are ignored (tsan.supp); a report in our code fails the test.
# TSAN_TIME_SCALE stretches the deadlines of tests that wait on real gRPC round
# trips (test_support/time_scale.h); assertions are unchanged.
TSAN_ABSL ?= $(CURDIR)/$(TSAN_BUILD)/absl-tsan
TSAN_TIME_SCALE ?= 10
TSAN_ENV = LD_LIBRARY_PATH=$(TSAN_ABSL)/lib PODIUM_TEST_TIME_SCALE=$(TSAN_TIME_SCALE) \
  TSAN_OPTIONS="suppressions=$(CURDIR)/tsan.supp halt_on_error=1 second_deadlock_stack=1"
tsan: deps
	tools/tsan/build-absl.sh $(TSAN_ABSL)
	cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPODIUM_TSAN=ON \
	  -DCMAKE_PREFIX_PATH=$(TSAN_ABSL)
	cmake --build $(TSAN_BUILD) -j$(JOBS) --target tsan_tests
	$(TSAN_ENV) ctest --test-dir $(TSAN_BUILD)/services/scheduler --output-on-failure -j$(JOBS) $(CTEST_ARGS)
	$(TSAN_ENV) ctest --test-dir $(TSAN_BUILD)/plugin-sdk --output-on-failure -j$(JOBS) $(CTEST_ARGS)

# UBSan only prints and goes on by default: halt_on_error makes a report fail
# its test, as an ASan or LeakSanitizer report does.
asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPODIUM_SANITIZE=ON
	cmake --build $(ASAN_BUILD) -j$(JOBS)
	cd $(ASAN_BUILD) && UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  ctest --output-on-failure -j$(JOBS) --timeout 600 $(CTEST_ARGS)

# Each fuzzer runs FUZZ_SECONDS on the kept corpus; inputs that add coverage are
# written back to it, crashes to $(FUZZ_BUILD)/artifacts/ (and fail the target).
fuzz: $(DEPS_STAMP)
	@command -v clang++ >/dev/null || { echo "make fuzz needs clang (apt-get install clang)"; exit 1; }
	CC=clang CXX=clang++ cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPODIUM_FUZZ=ON
	cmake --build $(FUZZ_BUILD) -j$(JOBS) --target $(addsuffix _fuzzer,$(FUZZERS))
	@mkdir -p $(FUZZ_BUILD)/artifacts
	@for f in $(FUZZERS); do \
	  echo "== $$f ($(FUZZ_SECONDS) s)"; \
	  $(FUZZ_BUILD)/adapters/common/fuzz/$${f}_fuzzer -max_total_time=$(FUZZ_SECONDS) -max_len=65536 \
	    -rss_limit_mb=2048 -timeout=10 -artifact_prefix=$(FUZZ_BUILD)/artifacts/$${f}- \
	    $(FUZZ_CORPUS)/$$f || exit 1; \
	done

clean:
	rm -rf $(BUILD) $(TSAN_BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
