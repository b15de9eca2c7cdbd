#!/bin/sh
# h200.sh: one step of the demo model's training on the GPU machine; run it again until it
# says "done". Each run does what is missing and stops within the machine's 10-minute limit
# per command:
#   1. the data: data.py in the background on all cores but two, DEMO_CLIPS clips, unless
#      .demo/data/meta.json says it has finished (or a data.py is still writing from an
#      earlier call); the training starts on the first shard and reads the others as they
#      come (train.py --grow), so a fresh machine loses seconds, not the minutes a whole
#      synthesis takes,
#   2. the tokenizer: .demo/init/tokenizer.model when a model to go on from is carried
#      there (its weights need its tokenizer), else tokenizer.py once the data are complete,
#   3. training (train.py --resume) until DEMO_SESSION minutes after the call's start, towards
#      DEMO_MINUTES of training in all;
#      DEMO_RUNS=N trains N models at once on the one GPU and the one data set (each a
#      process: one training step is bound by its host, so N of them keep the GPU busier;
#      run i adds DEMO_ARGS_i, e.g. its own --seed and --lr: the fine-tunes to average),
#   4. copies what must come back into $OUT: small.pt (bf16, ~15 MiB), tokenizer.model,
#      the log, final.json once training has ended; for N > 1, each run's small.pt and log
#      in $OUT/run-i (final.json is the log's last line) and tokenizer.model, the synthesis's
#      last lines printed: at most 8 files come back from a call, so N is at most 3 (3 x 15.3
#      MiB, and room for one small.pt.part should the call be killed while copying); small.pt
#      and the log also while it trains (every 15 s), so that a call killed at its limit
#      still brings them back.
# Everything is reproducible from the seed, so a fresh machine (the old one given back) only
# needs .demo/espeak (carry it) and, to go on, the last small.pt carried as
# .demo/resume/small.pt: it is used when .demo/ckpt has no full.pt of its own. (Which clips
# a step sees while the data still grow depends on timing. Finished data on a warm machine
# are reused as they are, whatever DEMO_PERTURB, DEMO_NAMED or DEMO_QUESTIONS say now.)
# For DEMO_RUNS > 1 the carried checkpoints are .demo/resume-i/small.pt, and a new set of runs
# on a warm machine needs the old .demo/ckpt-i removed first (else they resume).
# Why this shape: the machine has no network and no espeak-ng (espeak_bundle.sh makes the
# bundle here), what travels is 64 MiB each way, and a command runs at most 10 minutes.
# Not here: export and evaluation (export.py, eval.py: here, on the CPU, with our engine).
#
# usage (on the GPU machine, from the repository root): sh tools/train-demo/h200.sh
#   env: DEMO_CLIPS (120000) DEMO_MINUTES (18) DEMO_SESSION (8) DEMO_SIZE (demo)
#        DEMO_PERTURB (data.py --speed-perturb, 0) DEMO_NAMED (data.py --named, 0)
#        DEMO_QUESTIONS (data.py --questions, 0.1) DEMO_JOBS (data.py's cores: all but 2 per run)
#        DEMO_ARGS (more train.py flags) DEMO_RUNS (1) DEMO_ARGS_1 .. DEMO_ARGS_N
#        OUT (where to put what comes back; the run tool sets it)
set -eu
cd "$(dirname "$0")/../.."
D=.demo
OUT=${OUT:-$D/out}
CLIPS=${DEMO_CLIPS:-120000}
MINUTES=${DEMO_MINUTES:-18}
SESSION=${DEMO_SESSION:-8}
SIZE=${DEMO_SIZE:-demo}
RUNS=${DEMO_RUNS:-1}
case "$RUNS" in 1|2|3) ;; *) echo "DEMO_RUNS=$RUNS: 1 to 3 (at most 8 files come back from a call)" >&2; exit 2 ;; esac
# every run holds all the clips in its memory, ~0.115 MB a clip (46 GB for 400,000)
if [ $((CLIPS * RUNS)) -gt 800000 ]; then
    echo "DEMO_CLIPS=$CLIPS x DEMO_RUNS=$RUNS: more than 800,000 clips in memory (~92 GB of the 128); fewer clips" >&2
    exit 2
fi
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
t0=$(date +%s)
log() { echo "[h200.sh $(($(date +%s) - t0)) s] $*"; }
# wait_for FILE: until data.py has written FILE; fails if data.py stops without it
wait_for() {
    while [ ! -f "$1" ]; do
        sleep 2
        pgrep -f "data.py --out $D/data" > /dev/null || [ -f "$1" ] ||
            { tail -n 20 "$D/data.log" >&2; echo "data.py stopped before writing $1" >&2; exit 1; }
    done
}

GROW=""
if [ ! -f "$D/data/meta.json" ]; then
    GROW="--grow 100"
    if pgrep -f "data.py --out $D/data" > /dev/null; then
        log "data.py is still writing $D/data (from an earlier call)"
    else
        test -x "$D/espeak/espeak-ng" || { echo "no $D/espeak: run tools/train-demo/espeak_bundle.sh here and carry it" >&2; exit 1; }
        jobs=${DEMO_JOBS:-$(($(nproc) > 2 + 2 * RUNS ? $(nproc) - 2 * RUNS : 2))}
        log "synthesising $CLIPS clips on $jobs cores, beside the training"
        nohup python3 tools/train-demo/data.py --out "$D/data" --train "$CLIPS" --heldout 200 --seed 1 \
            --jobs "$jobs" --shard 2000 --keep --speed-perturb "${DEMO_PERTURB:-0}" --named "${DEMO_NAMED:-0}" \
            --questions "${DEMO_QUESTIONS:-0.1}" >> "$D/data.log" 2>&1 < /dev/null &
    fi
    wait_for "$D/data/train-0000.npz"
fi
if [ ! -f "$D/data/tokenizer.model" ]; then
    if [ -f "$D/init/tokenizer.model" ]; then
        log "tokenizer of the carried $D/init"
        cp "$D/init/tokenizer.model" "$D/data/tokenizer.model"
    else
        log "tokenizer (after the whole synthesis)"
        wait_for "$D/data/meta.json"
        GROW=""
        python3 tools/train-demo/tokenizer.py --data "$D/data" --out "$D/data/tokenizer.model"
    fi
fi
# Run i's folders: .demo/ckpt, .demo/resume and $OUT itself for one run; .demo/ckpt-i,
# .demo/resume-i and $OUT/run-i for DEMO_RUNS > 1 (each also gets DEMO_ARGS_i).
sfx() { [ "$RUNS" -eq 1 ] || echo "-$1"; }
ck_of() { echo "$D/ckpt$(sfx "$1")"; }
resume_of() { echo "$D/resume$(sfx "$1")"; }
out_of() { if [ "$RUNS" -eq 1 ]; then echo "$OUT"; else echo "$OUT/run-$1"; fi; }
for i in $(seq "$RUNS"); do
    ck=$(ck_of "$i"); mkdir -p "$ck" "$(out_of "$i")"
    if [ ! -f "$ck/full.pt" ] && [ -f "$(resume_of "$i")/small.pt" ]; then
        log "run $i: going on from the carried $(resume_of "$i")/small.pt"
        cp "$(resume_of "$i")/small.pt" "$ck/small.pt"
    fi
done
# DEMO_SESSION counts from the call's start: waiting for the first shard (~35 s on a fresh
# machine) comes out of it, so that a call sized to the 10-minute limit is not killed there
# (2026-12-05: DEMO_SESSION=9.2 plus that wait ran into the limit; the call was killed ~90
# steps past its last checkpoint). train.py's own start-up (~15 s) still counts on top.
# DEMO_SESSION=0 stays "no limit".
TRAIN_SESSION=$(awk -v s="$SESSION" -v d="$(($(date +%s) - t0))" 'BEGIN { m = s - d / 60; printf "%.2f", (s <= 0 ? 0 : (m > 0.5 ? m : 0.5)) }')
log "training $RUNS run(s) ($TRAIN_SESSION min of this call's $SESSION; $MINUTES in all)"
cp "$D/data/tokenizer.model" "$OUT/"
# Copy each new checkpoint and the log into $OUT as they come: a call killed at its time
# limit (which is the device time left, when that is less than asked) still brings back
# what $OUT holds, so at most save-every steps are lost.
( while sleep 15; do
      for i in $(seq "$RUNS"); do
          ck=$(ck_of "$i"); o=$(out_of "$i")
          if [ "$ck/small.pt" -nt "$o/small.pt" ] 2>/dev/null || [ ! -f "$o/small.pt" ]; then
              { [ -f "$ck/small.pt" ] && cp "$ck/small.pt" "$o/small.pt.part" && mv "$o/small.pt.part" "$o/small.pt"; } || true
          fi
          cp "$ck/train.log" "$o/" 2>/dev/null || true
      done
      [ "$RUNS" -gt 1 ] || tail -n 3 "$D/data.log" > "$OUT/data.log" 2>/dev/null || true
  done ) &
mirror=$!
trap 'kill $mirror 2>/dev/null' EXIT
pids=""
for i in $(seq "$RUNS"); do
    ck=$(ck_of "$i")
    echo "== $(date -u +%FT%TZ) h200.sh call" >> "$ck/train.log"
    eval "more=\${DEMO_ARGS_$i:-}"
    # shellcheck disable=SC2086
    python3 tools/train-demo/train.py --data "$D/data" --tokenizer "$D/data/tokenizer.model" --out "$ck" \
        --size "$SIZE" --minutes "$MINUTES" --session-minutes "$TRAIN_SESSION" --resume --threads 2 --eval-every 2000 \
        --save-every 500 $GROW ${DEMO_ARGS:-} $more >> "$ck/train.log" 2>&1 &
    pids="$pids $!"
done
failed=0
i=0
for pid in $pids; do
    i=$((i + 1))
    wait "$pid" || { echo "run $i failed:"; tail -n 40 "$(ck_of "$i")/train.log"; failed=1; }
done
all_done=1
for i in $(seq "$RUNS"); do
    ck=$(ck_of "$i"); o=$(out_of "$i")
    [ "$RUNS" -eq 1 ] || echo "== run $i"
    sed -n '/^== .* h200.sh call$/h; /^== .* h200.sh call$/!H; ${x;p}' "$ck/train.log" | grep -v "Warning\|warn(" | tail -n 60
    cp "$ck/small.pt" "$ck/train.log" "$o/" 2>/dev/null || true
    if [ ! -f "$ck/final.json" ]; then all_done=0; elif [ "$RUNS" -eq 1 ]; then cp "$ck/final.json" "$o/"; fi
done
if [ "$RUNS" -eq 1 ]; then
    [ -f "$D/data/meta.json" ] && cp "$D/data/meta.json" "$OUT/"
    tail -n 3 "$D/data.log" > "$OUT/data.log" 2>/dev/null || true
else
    echo "== the synthesis"; tail -n 3 "$D/data.log" 2>/dev/null || true
fi
[ "$failed" -eq 0 ] || exit 1
if [ "$all_done" -eq 1 ]; then
    log "done: training ended; $OUT has small.pt, tokenizer.model, final.json (for N > 1: run-i/small.pt, run-i/train.log)"
else
    log "not done yet: run again"
fi
