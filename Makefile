# relaxc: the two set-up commands of the README, and a few conveniences.
#   make demo   install what is missing, build, run the bundled example
#   make test   install what is missing, build, run the whole test suite through ctest
#   make check-house  build, then scripts/check-house.py: floors (includes and links), functions
#   make install PREFIX=/opt/relaxc   build, then cmake --install (docs/install.md)
#   make install-runtime PREFIX=... BACKENDS=vulkan   the runtime alone, one backend, installed
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
PREFIX ?= /usr/local
BACKENDS ?= all

.PHONY: all deps build demo test asan fuzz matrix clean format check-format check-house install \
	install-runtime

all: build

deps:
	@bash scripts/deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	@bash scripts/demo.sh $(BUILD)

# scripts/serve-venv.sh: the openai client's virtual environment for relaxc serve's client tests
# (tests/serve), from PyPI, made once and kept while tests/serve/requirements.txt is unchanged;
# when it cannot be made (no network) the other tests still run, and those fail saying how to make it
test: build
	@bash scripts/serve-venv.sh $(BUILD) || true
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# the tests again in an AddressSanitizer + UndefinedBehaviorSanitizer build (the kernel sweeps at
# three sizes and test_llm's quick mode: the same code paths, less of the work ASan slows down;
# the tests' kernel cache is make test's, so shaderc/NVRTC do not compile the same kernels again)
asan: deps
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DRX_SANITIZE=ON >/dev/null
	@cmake --build build-asan -j $(JOBS)
	@bash scripts/serve-venv.sh build-asan || true
	@cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  RX_KERNEL_SIZES=1,7,33 RX_LLM_QUICK=1 RX_TEST_KCACHE=$(CURDIR)/$(BUILD)/tests/kcache \
	  ctest --output-on-failure -j $(JOBS)

# the libFuzzer harnesses (tests/fuzz, docs/fuzzing.md): clang-16, each run briefly over its seeds
fuzz: deps
	@CC=clang-16 cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRX_FUZZ=ON >/dev/null
	@cmake --build build-fuzz -j $(JOBS) --target fuzz_all
	@cd build-fuzz && ctest -L fuzz --output-on-failure -j $(JOBS)

# gcc-12 and clang-16 in Release (scripts/build-matrix.sh; MATRIX_ONLY adds Debug), built, not tested, -Werror
matrix: deps
	@bash scripts/build-matrix.sh

format:
	@clang-format -i $$(git ls-files '*.c' '*.h')

check-format:
	@bash scripts/check-format.sh

# the house rules (scripts/check-house.py); the link-level floors read the objects of $(BUILD)
check-house: build
	@python3 scripts/check-house.py layering functions link $(BUILD)

# cmake --install of the whole project (the CLI, headers, libraries, CMake and pkg-config files)
install:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)
	@cmake --install $(BUILD) --prefix $(PREFIX)

# the runtime alone for apps (-DRX_RUNTIME_ONLY=ON), with BACKENDS (all, vulkan, cuda or metal)
install-runtime:
	@cmake -S . -B build-runtime-$(BACKENDS) -DCMAKE_BUILD_TYPE=Release -DRX_RUNTIME_ONLY=ON \
	  -DRX_BACKENDS=$(BACKENDS) $(CMAKE_FLAGS) >/dev/null
	@cmake --build build-runtime-$(BACKENDS) -j $(JOBS)
	@cmake --install build-runtime-$(BACKENDS) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) build-asan build-fuzz build-runtime-*
