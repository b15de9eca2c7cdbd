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
# peak GPU memory, host submit share, and the ratio to transformers.
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
# filled: for runs that compare levers).
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
MODEL=${CT_FULL_MODEL:-/tmp/ct-full-random}
REF=${CT_REF_DIR:-../shared/reference}
[ -f "$REF/bench_transformers.py" ] || REF=.ref
. scripts/gpu-env.sh

echo "== build"
if ! { cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DTG_CUDA_PRECOMPILE=${GPU_CHECK_PRECOMPILE:-ON} &&
       cmake --build "$BUILD" -j"$(nproc)" --target bench-transcribe_batch; } > "$LOG/build.log" 2>&1; then
  grep -E "error|Error" "$LOG/build.log" | head -20; echo "gpu-vs-transformers: build failed"; exit 1
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1 | tee "$LOG/gpu.txt"

if [ ! -f "$MODEL/model.safetensors" ]; then
  echo "== checkpoint (full size, random, pinned token)"
  T0=$(date +%s)
  python3 bench/make_full_random.py tests/data/tiny/hub "$MODEL" --pin-token 1000 || exit 1
  echo "written in $(( $(date +%s) - T0 )) s"
fi

if [ "${COLD:-1}" = 1 ]; then
  echo "== ours, cold: a fresh process, an empty kernel cache, batch 1"
  rm -rf /tmp/ct-bench-kcache-cold
  CT_CUDA_CACHE_DIR=/tmp/ct-bench-kcache-cold CT_LOG=warn "./$BUILD/bench-transcribe_batch" --model "$MODEL" \
      --backend cuda --batches 1 --tokens "$TOKENS" --runs 1 --json "$LOG/cold.json" 2>&1 | tee "$LOG/cold.log"
  echo "== ours, warm: a fresh process, the kernel cache the cold run filled, batch 1"
  CT_CUDA_CACHE_DIR=/tmp/ct-bench-kcache-cold CT_LOG=warn "./$BUILD/bench-transcribe_batch" --model "$MODEL" \
      --backend cuda --batches 1 --tokens "$TOKENS" --runs 1 --json "$LOG/warm.json" 2>&1 | tee "$LOG/warm.log"
fi
echo "== ours"
export CT_CUDA_CACHE_DIR=/tmp/ct-bench-kcache
CT_LOG=warn "./$BUILD/bench-transcribe_batch" --model "$MODEL" --backend cuda --batches "$BATCHES" \
    --tokens "$TOKENS" --runs "$RUNS" --json "$LOG/ours.json" 2>&1 | tee "$LOG/ours.log"
if [ "${PROFILE:-0}" = 1 ]; then
  CT_CUDA_PROFILE=2 "./$BUILD/bench-transcribe_batch" --model "$MODEL" --backend cuda --batches "${PROFILE_BATCHES:-1,64}" \
      --tokens "$TOKENS" --runs 1 > "$LOG/profile.log" 2>&1
  grep -E "nodes \(|^\[profile\]   " "$LOG/profile.log" | sort | uniq -c | sort -rn | head -60
fi

if [ "${PEER:-1}" = 1 ]; then
  echo "== transformers ($REF/bench_transformers.py)"
  PYTHONUNBUFFERED=1 python3 "$REF/bench_transformers.py" --batches "$BATCHES" --tokens "$TOKENS" \
      --json "$LOG/peer.json" 2>&1 | grep -vE "Warning|warn" | tee "$LOG/peer.log"
fi

[ -n "${OUT:-}" ] && tar czf "$OUT/gpu-vs-transformers.tgz" -C /tmp gpu-vs-transformers
echo
echo "==================== ours vs transformers, $(date -u +%Y-%m-%d), $(cut -d, -f1 "$LOG/gpu.txt") ===================="
python3 - "$LOG" "$TOKENS" <<'EOF'
import json, os, sys
log, tokens = sys.argv[1], int(sys.argv[2])
def load(name):
    p = os.path.join(log, name)
    return {r["batch"]: r for r in json.load(open(p))} if os.path.exists(p) else {}
ours, peer = load("ours.json"), load("peer.json")
def f(v, fmt="%.0f"):
    return "-" if v is None else fmt % v
print("%5s | %9s %8s %8s %8s %8s %8s %8s %7s | %9s %8s %8s | %6s" % (
    "batch", "total ms", "front", "encoder", "decoder", "ms/step", "RTFx", "peak GiB", "submit",
    "hf total", "hf RTFx", "hf GiB", "ratio"))
for b in sorted(set(ours) | set(peer)):
    o, p = ours.get(b, {}), peer.get(b, {})
    hf_ms = p["total_s"] * 1e3 if p else None
    ratio = (o.get("rtfx") / p["rtfx"]) if o and p else None
    submit = o.get("host_submit_share")
    print("%5d | %9s %8s %8s %8s %8s %8s %8s %7s | %9s %8s %8s | %6s" % (
        b, f(o.get("total_ms"), "%.1f"), f(o.get("frontend_ms"), "%.1f"), f(o.get("encoder_ms"), "%.1f"),
        f(o.get("decoder_ms"), "%.1f"), f(o.get("step_ms"), "%.3f"), f(o.get("rtfx")),
        f(o.get("peak_gib"), "%.2f"), f(submit, "%.2f"), f(hf_ms, "%.1f"),
        f(p.get("rtfx")), f(p.get("peak_mem_gib"), "%.2f"), f(ratio, "%.2f")))
# The cold start is judged with the weights upload in it, as every earlier
# table did (the stricter reading of the issue's target), the warm start
# without it, as the target says; both printed either way. The first
# transcription ends with its last token, so each figure bounds the time to
# the first token from above.
for name, what, target, with_weights in (("cold.json", "cold start (empty kernel cache)", 1500, True),
                                         ("warm.json", "warm start (kernel cache filled)", 500, False)):
    r = load(name).get(1)
    if not r:
        continue
    whole = r["open_ms"] + r["first_ms"]
    apart = whole - r["weights_ms"] if "weights_ms" in r else None
    judged = whole if with_weights else apart
    print("%s, a fresh process, batch 1: session open %.0f ms (backends: driver, context, kernel library "
          "%s ms; weights %s ms for %s GB), first transcription %.0f ms: to its last token %.0f ms with the "
          "weights, %s without; target <= %d %s: %s" % (
          what, r["open_ms"], f(r.get("backends_ms")), f(r.get("weights_ms")), f(r.get("weights_gb"), "%.2f"),
          r["first_ms"], whole, f(apart), target, "with them" if with_weights else "without them",
          "n/a (no weights time in this JSON)" if judged is None else "met" if judged <= target else "not met"))
if ours.get(1):
    print("warm median of a batch-1 transcription in the running process: %.0f ms" % ours[1]["total_ms"])
print("ours: medians of %s runs after two warm-ups, wall inside the process, frontend included; "
      "%d new tokens per clip; ratio = our RTFx / transformers' RTFx" % (
      next(iter(ours.values()))["runs"] if ours else "?", tokens))
EOF
