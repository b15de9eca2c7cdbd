# Thin wrapper over CMake; see README.md.
#   make          build (Release, warnings are errors)
#   make test     build and run every test through ctest
#   make deps     install the Debian packages the build needs (root)
#   make asan     build with AddressSanitizer + UBSan in build-asan/ and run the tests
#   make tsan     build with ThreadSanitizer in build-tsan/ and run the threaded tests
#   make run      build and transcribe the bundled clip with the bundled demo model
#                 (text on stdout, files under build/run-output)
JOBS ?= $(shell nproc)
BUILD ?= build
CMAKE_ARGS ?=

.PHONY: all build test deps asan tsan run bench fuzz clean

all: build

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

deps:
	apt-get update
	apt-get install -y --no-install-recommends build-essential cmake pkg-config \
	    libcjson-dev libopenblas-dev libsoxr-dev clang libclang-rt-dev \
	    libavformat-dev libavcodec-dev libswresample-dev libavutil-dev ffmpeg python3

asan:
	$(MAKE) test BUILD=build-asan CMAKE_ARGS="-DTG_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug -DTG_CUDA_PRECOMPILE=OFF"

# ThreadSanitizer over the tests that run threads: the pool, the CPU backend,
# the conformance suite's threaded setups, the frontend's parallel clips,
# sessions and the CLI's producer thread.
TSAN_TESTS ?= base/threadpool|cpu/|^ops$$|audio/mel|asr/session|asr/pipeline|cli/
tsan:
	cmake -S . -B build-tsan -DTG_TSAN=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTG_CUDA=OFF
	cmake --build build-tsan -j $(JOBS)
	cd build-tsan && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 allocator_may_return_null=1" ctest --output-on-failure -j $(JOBS) -R '$(TSAN_TESTS)'

# The main job on the bundled default: the demo model (models/cohere-demo-en,
# trained on synthetic English speech by tools/train-demo; --model's default)
# on its bundled clip, a sentence it never trained on in a voice variant it
# never heard. The text goes to stdout and the subtitles under
# $(BUILD)/run-output, never into the source tree.
DEMO = models/cohere-demo-en
run: build
	@echo "spoken:      $$(cat $(DEMO)/sample.txt)"
	@printf 'transcribed: '
	@./$(BUILD)/cohere-transcribe --text-only --quiet $(DEMO)/sample.wav
	./$(BUILD)/cohere-transcribe --existing overwrite \
	    --formats txt srt vtt json --output-dir $(BUILD)/run-output $(DEMO)/sample.wav

bench: build
	./$(BUILD)/bench-ops

# libFuzzer targets (clang), built in build-fuzz/; run one with
#   build-fuzz/fuzz_wav fuzz/corpus/fuzz_wav -max_total_time=600
fuzz:
	CC=clang cmake -S . -B build-fuzz -DTG_FUZZ=ON -DTG_CUDA=OFF -DCMAKE_BUILD_TYPE=Debug
	cmake --build build-fuzz -j $(JOBS)

clean:
	rm -rf build build-asan build-tsan build-fuzz
