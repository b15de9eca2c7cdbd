#!/usr/bin/env bash
# gpu-check.sh: one run on the GPU machine: build, the CUDA backend's own
# tests, the op conformance suite against the CUDA backend, compute-sanitizer
# memcheck on the suite and on the tests of fused groups, replay and
# copies, the GPU benchmarks, then
# a short table (last, so the end of the output carries it).
#
# Usage (repository root): scripts/gpu-check.sh [build-dir]
# GPU_CHECK_STAGES picks stages (default: all of "tests conformance fixtures
# bench memcheck"), GPU_CHECK_BENCHES the benchmarks (default: all seven),
# GPU_CHECK_COMPILE=1 adds test-cuda-compile (NVRTC only; CI runs it),
# GPU_CHECK_PRECOMPILE=OFF builds without the nvcc fatbins (faster; the
# kernels then come from NVRTC), for short exploratory runs.
# Logs go to /tmp/gpu-check-logs, and as one archive to $OUT when it is set
# (the device tool's output folder, which takes few files).
# Exit status 0 when every row of the summary passed; 1 when the build
# failed or any row did (a non-zero rc, a crash named by its signal, a
# target that did not build).
# Build dependencies missing on the machine (cJSON, OpenBLAS, soxr, pkg-config)
# are unpacked from .debs/tg-deps.txz (carried, git-ignored) into a private
# prefix when it is there.
set -u
BUILD=${1:-build-gpu}
LOG=/tmp/gpu-check-logs
rm -rf "$LOG"
mkdir -p "$LOG"
JOBS=$(nproc 2>/dev/null || echo 4)
# The whole run stops starting new stages past GPU_CHECK_BUDGET seconds
# (device time is scarce); each stage gets at most what is left.
START=$(date +%s)
BUDGET=${GPU_CHECK_BUDGET:-900}
cap() { local l=$(( BUDGET - ($(date +%s) - START) )); [ "$l" -lt "$1" ] && echo $(( l > 5 ? l : 5 )) || echo "$1"; }
STAGES=${GPU_CHECK_STAGES:-tests conformance fixtures bench memcheck}
BENCHES=${GPU_CHECK_BENCHES:-cuda_ceilings cuda_lt_candidates cuda_matmul cuda_bandwidth cuda_graph cuda_start cuda_attention cuda_conv}
stage() { case " $STAGES " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
declare -a ROWS
# A row of the summary; one whose value says FAILED or a non-zero rc
# counts as a failure (the exit status says so).
FAILS=0
row() {
  ROWS+=("$(printf '%-44s %s' "$1" "$2")")
  case "$2" in FAILED*|rc=[1-9]*) FAILS=$((FAILS + 1)) ;; esac
}
# A test's output line-buffered where stdbuf is there, so that a crash
# leaves the lines before it in the log (its summary line never comes).
LINEBUF=$(command -v stdbuf >/dev/null && echo "stdbuf -oL" || echo "")
# What a test's exit status says: a signal by name where it died of one.
rc_text() {
  if [ "$1" -gt 128 ] && [ "$1" -lt 160 ]; then
    echo "rc=$1 (signal $(kill -l $(($1 - 128)) 2>/dev/null || echo $(($1 - 128))))"
  else
    echo "rc=$1"
  fi
}

# --- dependencies ---------------------------------------------------------------
. "$(dirname "$0")/gpu-env.sh"

# --- build ------------------------------------------------------------------------
T0=$(date +%s)
if ! cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DTG_CUDA_PRECOMPILE=${GPU_CHECK_PRECOMPILE:-ON} > "$LOG/cmake.log" 2>&1; then
  tail -30 "$LOG/cmake.log"; echo "gpu-check: cmake failed"; exit 1
fi
TARGETS="test-cuda-backend test-cuda-kernels test-cuda-matvec test-cuda-attn_step test-cuda-attn_mma test-cuda-matvec_cl test-cuda-chain test-cuda-pf_ahead test-cuda-cross_q test-cuda-first_use test-cuda-choices test-cuda-compile test-cuda-cache test-cuda-hazard test-cuda-session_fault"
for bch in $BENCHES; do TARGETS="$TARGETS bench-$bch"; done
if ! cmake --build "$BUILD" -j"$JOBS" --target $TARGETS > "$LOG/build.log" 2>&1; then
  grep -E "error|Error" "$LOG/build.log" | head -30; echo "gpu-check: build failed"; exit 1
fi
# The conformance suite is built on its own: its failure to build must not
# hide the backend's own results.
cmake --build "$BUILD" -j"$JOBS" --target test-ops >> "$LOG/build.log" 2>&1 || row "build test-ops" "FAILED"
HAVE_FIXTURES=0 HAVE_FRONTEND=0 HAVE_BEAM=0
if [ -f tests/model/test_fixtures.c ]; then
  cmake --build "$BUILD" -j"$JOBS" --target test-model-fixtures >> "$LOG/build.log" 2>&1 && HAVE_FIXTURES=1 ||
    row "build test-model-fixtures" "FAILED"
fi
cmake --build "$BUILD" -j"$JOBS" --target test-model-frontend >> "$LOG/build.log" 2>&1 && HAVE_FRONTEND=1 ||
  row "build test-model-frontend" "FAILED"
cmake --build "$BUILD" -j"$JOBS" --target test-model-beam >> "$LOG/build.log" 2>&1 && HAVE_BEAM=1 ||
  row "build test-model-beam" "FAILED"
row "build" "ok ($(( $(date +%s) - T0 )) s)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -2

export CT_CUDA_CACHE_DIR=/tmp/tg-gpu-check-cache CT_CUDA_TEST_FULL=1
rm -rf "$CT_CUDA_CACHE_DIR"

# --- tests ------------------------------------------------------------------------
# test-cuda-compile (every kernel file under NVRTC for sm_80-90) needs
# NVRTC, not a GPU: CI runs it on every push (ctest's cuda/compile, ~65 s
# there), and here it took 106 s of device time a run. It runs here only
# with GPU_CHECK_COMPILE=1 (for a new driver's or toolkit's NVRTC).
TESTS="cuda-choices cuda-cache"
[ "${GPU_CHECK_COMPILE:-0}" = 1 ] && TESTS="cuda-compile $TESTS"
for t in $TESTS cuda-hazard cuda-backend cuda-kernels cuda-matvec cuda-attn_step cuda-attn_mma cuda-matvec_cl cuda-chain cuda-pf_ahead cuda-cross_q cuda-first_use cuda-session_fault; do
  stage tests || break
  T0=$(date +%s)
  timeout "$(cap 200)" $LINEBUF "./$BUILD/test-$t" > "$LOG/test-$t.log" 2>&1
  rc=$?
  res=$(tail -1 "$LOG/test-$t.log")
  row "test-$t" "$(rc_text $rc): $res ($(( $(date +%s) - T0 )) s)"
  if [ $rc -ne 0 ]; then grep -E "FAIL|CHECK failed|failed:" "$LOG/test-$t.log" | head -20; fi
done
grep -hE "NMSE|graphs:|cold start|cc [0-9]" "$LOG/test-cuda-backend.log" "$LOG/test-cuda-kernels.log" \
  "$LOG/test-cuda-matvec.log" "$LOG/test-cuda-attn_step.log" "$LOG/test-cuda-attn_mma.log" "$LOG/test-cuda-matvec_cl.log" \
  "$LOG/test-cuda-chain.log" "$LOG/test-cuda-pf_ahead.log" "$LOG/test-cuda-cross_q.log" | head -84
grep -h "first compute:" "$LOG/test-cuda-first_use.log"

if stage conformance; then
T0=$(date +%s)
timeout "$(cap 240)" $LINEBUF "./$BUILD/test-ops" --backend cuda > "$LOG/test-ops-cuda.log" 2>&1
rc=$?
row "conformance (test-ops --backend cuda)" "$(rc_text $rc): $(tail -1 "$LOG/test-ops-cuda.log") ($(( $(date +%s) - T0 )) s)"
grep -iE "fail|nmse.*>|error" "$LOG/test-ops-cuda.log" | head -25
fi

# A model test on the GPU (CT_TEST_BACKEND=cuda): model_test NAME LABEL CAP
# [GREP]: runs build/test-model-NAME when it built, a row for it, and the
# lines of its log that GREP (failures by default) picks.
model_test() {
  T0=$(date +%s)
  CT_TEST_BACKEND=cuda timeout "$(cap "$3")" $LINEBUF "./$BUILD/test-model-$1" > "$LOG/test-model-$1-cuda.log" 2>&1
  rc=$?
  row "$2" "$(rc_text $rc): $(tail -1 "$LOG/test-model-$1-cuda.log") ($(( $(date +%s) - T0 )) s)"
  grep -E "${4:-FAIL|CHECK failed|failed:}" "$LOG/test-model-$1-cuda.log" | head -20
}
if stage fixtures; then
  # the model end to end: the transformers fixtures under the GPU tolerances
  [ "$HAVE_FIXTURES" = 1 ] && model_test fixtures "model fixtures on cuda" 240
  # the log-mel frontend as graph nodes on the GPU against mel.c
  [ "$HAVE_FRONTEND" = 1 ] && model_test frontend "frontend graph on cuda" 120 "worst|rel L2|FAIL|CHECK failed|failed:"
  # beam search's rows and cache gathers (tests/model/test_beam.c)
  [ "$HAVE_BEAM" = 1 ] && model_test beam "beam search on cuda" 120
fi

# --- benchmarks ---------------------------------------------------------------------
for bch in $BENCHES; do
  stage bench || break
  timeout "$(cap 120)" "./$BUILD/bench-$bch" > "$LOG/bench-$bch.log" 2>&1
  echo "== bench-$bch (rc=$?)"; grep -vE "^RESULT" "$LOG/bench-$bch.log" | tail -${GPU_CHECK_BENCH_LINES:-3}
done

# --- memcheck -----------------------------------------------------------------------
if ! stage memcheck; then
  :
elif command -v compute-sanitizer >/dev/null; then
  T0=$(date +%s)
  timeout "$(cap 300)" compute-sanitizer --tool memcheck --error-exitcode 99 "./$BUILD/test-ops" --backend cuda \
      > "$LOG/memcheck.log" 2>&1
  rc=$?
  errs=$(grep -oE "ERROR SUMMARY: [0-9]+ error" "$LOG/memcheck.log" | tail -1)
  row "memcheck on the suite" "rc=$rc ${errs:-no summary} ($(( $(date +%s) - T0 )) s)"
  grep -E "Invalid|ERROR" "$LOG/memcheck.log" | head -10
  # Fused groups (the suite runs single ops), the encoder attention with Q
  # staged by cp.async, the products on clusters, graph replay, the staging ring's copies; not the
  # backend tests that fault on purpose (a bad launch, a wild write).
  # test-model-fixtures under the sanitizer died on the host with no output
  # (2026-12-04; src/backend/cuda/NOTES.md), so it is not here.
  for mc in "test-cuda-kernels fused_and_mixed" "test-cuda-matvec matvec_mma_wide" "test-cuda-matvec matvec_mma_tiles16" \
            "test-cuda-matvec ln_stage" "test-cuda-kernels norm_pair" \
            "test-cuda-attn_mma q_staged" "test-cuda-matvec_cl match_cpu" "test-cuda-chain against_launches" "test-cuda-pf_ahead any_kv" "test-cuda-cross_q matches_cpu" \
            "test-cuda-backend graphs_capture" "test-cuda-backend buffers_set_get"; do
    set -- $mc
    [ -x "./$BUILD/$1" ] || continue
    T0=$(date +%s)
    timeout "$(cap 180)" compute-sanitizer --tool memcheck --error-exitcode 99 \
        "./$BUILD/$1" "$2" > "$LOG/memcheck-$2.log" 2>&1
    rc=$?
    errs=$(grep -oE "ERROR SUMMARY: [0-9]+ error" "$LOG/memcheck-$2.log" | tail -1)
    row "memcheck on $1 $2" "rc=$rc ${errs:-no summary} ($(( $(date +%s) - T0 )) s)"
    grep -E "Invalid|ERROR" "$LOG/memcheck-$2.log" | head -6
  done
else
  row "memcheck on the suite" "compute-sanitizer not found"
fi

echo
echo "==================== gpu-check summary ===================="
for r in "${ROWS[@]}"; do echo "$r"; done
if stage bench; then cat "$LOG"/bench-*.log 2>/dev/null | grep -E "^RESULT" | sed 's/^RESULT //'; fi
if [ -n "${OUT:-}" ]; then tar czf "$OUT/gpu-check-logs.tgz" -C /tmp gpu-check-logs; fi
if [ "$FAILS" -gt 0 ]; then
  echo "gpu-check: $FAILS of the rows above failed"
  exit 1
fi
echo "gpu-check: every row passed"
