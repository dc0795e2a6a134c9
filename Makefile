# User entry points. Each target installs missing system packages first.
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps configure build test check fuzz sanitize demo bench clean format

all: build

deps:
	@./scripts/install-deps

configure: deps
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)

# The two tiers (scripts/run-tests says what each runs; a test's tier is declared where the
# test is). `make test`: unit tests, ftccl's multi-rank tests up to 4 ranks and 1 MiB, every
# fault kind end to end once, the runner, report and CLI paths: minutes, in parallel.
# `make check` (CI): every test, then the sanitizers, fuzzing and the soft-RoCE lab.
# One leg or one test: scripts/run-tests --tier check --leg fuzz; ctest --test-dir build -R NAME;
# FAULTLINE_BUILD=$(abspath build) python3 -m pytest tests/py/FILE.py::TEST.
test: build
	@./scripts/run-tests --tier test $(BUILD_DIR)

check: build
	@./scripts/run-tests --tier check $(BUILD_DIR)

# The libFuzzer targets (tests/fuzz), FUZZ_SECONDS each, in the shared sanitized build
# build-asan, then the mutated-scenario stress of `faultline validate` (10000 copies).
FUZZ_SECONDS ?= 60
# ftccl and the runner's pure parts under ASan+UBSan, then ftccl's multi-rank tests under TSan,
# each in its own clang build (build-asan, build-tsan). SANITIZE_ARGS: e.g. --tsan, --ci.
sanitize: deps
	@./scripts/sanitize $(SANITIZE_ARGS)

fuzz: build
	@./scripts/fuzz --seconds $(FUZZ_SECONDS)
	@FAULTLINE_BUILD=$(abspath $(BUILD_DIR)) tests/fuzz/mutate-scenarios --count 10000

# Only what scripts/demo runs (the CMake target demo-deps), not the tests and benchmarks.
demo: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target demo-deps
	@./scripts/demo $(BUILD_DIR)

# Every benchmark executable (bench/README.md); `make build` leaves out the benchmark-only ones.
bench: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target benchmarks

clean:
	rm -rf $(BUILD_DIR)

format:
	@find ccl injector runner reports tests bench -name '*.h' -o -name '*.cc' | xargs clang-format -i
