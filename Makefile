# Thin wrapper over CMake; see README.md.
#   make          build (Release, warnings are errors)
#   make test     build and run every test through ctest
#   make deps     install the Debian packages the build needs (root)
#   make asan     build with AddressSanitizer + UBSan in build-asan/ and run the tests
#   make run      build and transcribe the bundled clip with the bundled model
#                 (text on stdout, files under build/run-output)
JOBS ?= $(shell nproc)
BUILD ?= build
CMAKE_ARGS ?=

.PHONY: all build test deps asan run bench fuzz clean

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
	    libavformat-dev libavcodec-dev libswresample-dev libavutil-dev ffmpeg

asan:
	$(MAKE) test BUILD=build-asan CMAKE_ARGS="-DTG_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug -DTG_CUDA_PRECOMPILE=OFF"

# The main job on the bundled default: the tiny fixture model (random weights,
# so the text is gibberish by design) on a bundled clip. The text goes to
# stdout and the subtitles under $(BUILD)/run-output, never into tests/data.
run: build
	./$(BUILD)/cohere-transcribe --model tests/data/tiny/hub --text-only tests/data/tiny/audio/a.wav
	./$(BUILD)/cohere-transcribe --model tests/data/tiny/hub --existing overwrite \
	    --formats txt srt vtt json --output-dir $(BUILD)/run-output tests/data/tiny/audio/a.wav

bench: build
	./$(BUILD)/bench-ops

# libFuzzer targets (clang), built in build-fuzz/; run one with
#   build-fuzz/fuzz_wav fuzz/corpus/fuzz_wav -max_total_time=600
fuzz:
	CC=clang cmake -S . -B build-fuzz -DTG_FUZZ=ON -DTG_CUDA=OFF -DCMAKE_BUILD_TYPE=Debug
	cmake --build build-fuzz -j $(JOBS)

clean:
	rm -rf build build-asan build-fuzz
