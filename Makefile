# User entry points. Each target installs missing system packages first.
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps configure build test fuzz sanitize demo bench clean format

all: build

deps:
	@./scripts/install-deps

configure: deps
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)

test: build
	@./scripts/run-tests $(BUILD_DIR)

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

clean:
	rm -rf $(BUILD_DIR)

format:
	@find ccl injector runner reports tests bench -name '*.h' -o -name '*.cc' | xargs clang-format -i
