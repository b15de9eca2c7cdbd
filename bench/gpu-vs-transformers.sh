#!/usr/bin/env bash
# gpu-vs-transformers.sh: the released model size, ours and transformers side
# by side in one run on the GPU machine, one table last.
#
# Builds the engine (precompiled kernels on), writes a full-size random
# checkpoint in the Hub layout (bench/make_full_random.py, numpy only; 48 x
# 1280 encoder, 8 x 1024 decoder, 2.07 B parameters, bf16, with a pinned token
# so greedy decoding emits exactly --tokens tokens per clip), runs
# bench-transcribe_batch (the library API, ct_transcribe_batch over B clips
# of 35 s) at each batch size, then transformers' own script
# (bench_transformers.py: bf16, SDPA, features on the GPU) on the same sizes,
# and prints total, frontend, encoder, decoder, ms per decoder step, RTFx,
# peak GPU memory, host submit share, and the ratio to transformers. It also
# measures the card's two ceilings in the same run (bench-cuda_ceilings: BF16
# products, the copy rate), prints each row's floor (the model's FLOPs and
# bytes at those rates, bench/floors.py) and, last, issue 9's targets each
# met or not, with the floor and the stage furthest above it for one not met
# (bench/gpu_summary.py, which also reads a run's JSON alone, off the GPU).
#
# Usage (repository root, on the GPU machine):
#   bench/gpu-vs-transformers.sh [--batches 1,8,32,64] [--tokens 128] [--runs 3]
# Environment: CT_REF_DIR (where bench_transformers.py is: ../shared/reference,
# else .ref/, carried), CT_FULL_MODEL (checkpoint folder, default
# /tmp/ct-full-random; reused when present), PEER=0 (ours only), PROFILE=1
# (adds a CT_CUDA_PROFILE=2 run at PROFILE_BATCHES, default 1,64, to the log),
# GPU_CHECK_PRECOMPILE=OFF (no nvcc fatbins: a faster build; NVRTC compiles),
# COLD=0 (no cold- and warm-start runs, a fresh process each at batch 1, the
# first with an empty kernel cache, the second with the cache the first
# filled, each timed from nothing to its first token, each printing its
# first encoder call's host time by part and how many kernels it compiled:
# for runs that compare levers), BACKEND=cpu with a small checkpoint
# in CT_FULL_MODEL (tests/data/tiny/hub) to try the script itself without a
# GPU (then no ceilings, no floors, no transformers unless PEER=1, and the
# targets are not judged). LEVERS="NAME=VAR=VALUE ..." adds each lever
# against the default, interleaved (bench/levers.py, 2 rounds, at
# LEVER_BATCHES, default 1,8,64), printed before the table. STAMPS=1 adds,
# at STAMPS_BATCHES (default 1,8,64), a run whose kernels record their own
# timer (CT_CUDA_STAMPS: every kernel by NVRTC) and bench/stamps.py's
# reading of it: a replayed decoder step kernel by kernel, and the encoder
# passes' time by kernel.
# Logs and JSON go to /tmp/gpu-vs-transformers and, as one archive, to $OUT.
set -u
cd "$(dirname "$0")/.."
BATCHES=1,8,32,64 TOKENS=128 RUNS=3
while [ $# -gt 0 ]; do
  case "$1" in
    --batches) BATCHES=$2; shift 2 ;;
    --tokens) TOKENS=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    *) echo "usage: $0 [--batches 1,8,32,64] [--tokens 128] [--runs 3]" >&2; exit 2 ;;
  esac
done
LOG=/tmp/gpu-vs-transformers
rm -rf "$LOG"; mkdir -p "$LOG"
BUILD=${BUILD:-build-gpu}
BACKEND=${BACKEND:-cuda}
MODEL=${CT_FULL_MODEL:-/tmp/ct-full-random}
REF=${CT_REF_DIR:-../shared/reference}
[ -f "$REF/bench_transformers.py" ] || REF=.ref
. scripts/gpu-env.sh

echo "== build"
if ! { cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DTG_CUDA_PRECOMPILE=${GPU_CHECK_PRECOMPILE:-ON} &&
       cmake --build "$BUILD" -j"$(nproc)" --target bench-transcribe_batch bench-cuda_ceilings; } > "$LOG/build.log" 2>&1; then
  grep -E "error|Error" "$LOG/build.log" | head -20; echo "gpu-vs-transformers: build failed"; exit 1
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1 | tee "$LOG/gpu.txt"

if [ ! -f "$MODEL/model.safetensors" ]; then
  echo "== checkpoint (full size, random, pinned token)"
  T0=$(date +%s)
  python3 bench/make_full_random.py tests/data/tiny/hub "$MODEL" --pin-token 1000 || exit 1
  echo "written in $(( $(date +%s) - T0 )) s"
fi

if [ "$BACKEND" = cuda ]; then
  echo "== ceilings: BF16 products and the copy rate on this card (bench-cuda_ceilings)"
  "./$BUILD/bench-cuda_ceilings" --json "$LOG/ceilings.json" 2>&1 | tee "$LOG/ceilings.log"
fi

# start: one fresh process at batch 1 to its first token (NAME, its title), its
# debug log apart: the first encoder call's host time by part (graph and plan,
# inputs, compute) and how many kernels it compiled, a warm one none
start() {
  echo "== ours, $1: a fresh process, $2, batch 1"
  CT_CUDA_CACHE_DIR=/tmp/ct-bench-kcache-cold CT_LOG=debug "./$BUILD/bench-transcribe_batch" --model "$MODEL" \
      --backend "$BACKEND" --batches 1 --tokens "$TOKENS" --first-tokens 1 --runs 1 --json "$LOG/$1.json" \
      2> "$LOG/$1.debug.log" | tee "$LOG/$1.log"
  grep -vE "^\[(debug|info)\]" "$LOG/$1.debug.log" | head -5
  echo "first call: $(grep -m1 -o "encoder: .*" "$LOG/$1.debug.log"); kernels compiled: $(grep -c "cuda: compiled" "$LOG/$1.debug.log")"
  grep -m1 -o "first-use host time: .*" "$LOG/$1.debug.log"
  grep -m1 -o "prewarmed .*" "$LOG/$1.debug.log" # a warm start's first-use work, done during the upload
}
if [ "${COLD:-1}" = 1 ]; then
  rm -rf /tmp/ct-bench-kcache-cold
  start cold "an empty kernel cache"
  start warm "the kernel cache the cold run filled"
fi
echo "== ours"
export CT_CUDA_CACHE_DIR=/tmp/ct-bench-kcache
CT_LOG=warn "./$BUILD/bench-transcribe_batch" --model "$MODEL" --backend "$BACKEND" --batches "$BATCHES" \
    --tokens "$TOKENS" --runs "$RUNS" --json "$LOG/ours.json" 2>&1 | tee "$LOG/ours.log"
if [ -n "${LEVERS:-}" ]; then
  echo "== levers against the default (bench/levers.py)"
  # shellcheck disable=SC2086 # one word per lever
  python3 bench/levers.py --bench "./$BUILD/bench-transcribe_batch" --model "$MODEL" --backend "$BACKEND" \
      --batches "${LEVER_BATCHES:-1,8,64}" --tokens "$TOKENS" --runs "$RUNS" --rounds 2 --json "$LOG/levers.json" \
      $LEVERS 2>&1 | tee "$LOG/levers.log"
fi
if [ "${PROFILE:-0}" = 1 ]; then
  CT_CUDA_PROFILE=2 "./$BUILD/bench-transcribe_batch" --model "$MODEL" --backend "$BACKEND" --batches "${PROFILE_BATCHES:-1,64}" \
      --tokens "$TOKENS" --runs 1 > "$LOG/profile.log" 2>&1
  grep -E "nodes \(|^\[profile\]   " "$LOG/profile.log" | sort | uniq -c | sort -rn | head -60
fi

if [ "${STAMPS:-0}" = 1 ]; then
  echo "== the kernels' own timeline, replayed (CT_CUDA_STAMPS, bench/stamps.py)"
  for b in $(echo "${STAMPS_BATCHES:-1,8,64}" | tr , ' '); do
    CT_CUDA_STAMPS="$LOG/stamps-b$b.txt" CT_LOG=warn "./$BUILD/bench-transcribe_batch" --model "$MODEL" \
        --backend "$BACKEND" --batches "$b" --tokens "$TOKENS" --runs 2 > "$LOG/stamps-b$b.run.log" 2>&1
    echo "-- batch $b"
    python3 bench/stamps.py "$LOG/stamps-b$b.txt" --top 1 > "$LOG/stamps-b$b.log" 2>&1
    head -"${STAMPS_LINES:-120}" "$LOG/stamps-b$b.log"
  done
fi

if [ "${PEER:-$([ "$BACKEND" = cuda ] && echo 1 || echo 0)}" = 1 ]; then
  echo "== transformers ($REF/bench_transformers.py)"
  PYTHONUNBUFFERED=1 python3 "$REF/bench_transformers.py" --batches "$BATCHES" --tokens "$TOKENS" \
      --json "$LOG/peer.json" 2>&1 | grep -vE "Warning|warn" | tee "$LOG/peer.log"
fi

[ -n "${OUT:-}" ] && tar czf "$OUT/gpu-vs-transformers.tgz" -C /tmp gpu-vs-transformers
echo
echo "==================== ours vs transformers, $(date -u +%Y-%m-%d), $(cut -d, -f1 "$LOG/gpu.txt") ===================="
python3 bench/gpu_summary.py "$LOG" "$MODEL" --tokens "$TOKENS" $([ "$BACKEND" = cuda ] || echo --trial)
