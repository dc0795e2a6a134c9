# User entry points. Each target installs missing system packages first.
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps build test demo bench clean format

all: build

deps:
	@./scripts/install-deps

build: deps
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD_DIR) -j $(JOBS)

test: build
	@./scripts/run-tests $(BUILD_DIR)

demo: build
	@./scripts/demo $(BUILD_DIR)

clean:
	rm -rf $(BUILD_DIR)

format:
	@find ccl injector runner reports tests bench -name '*.h' -o -name '*.cc' | xargs clang-format -i
