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
#   3. DEMO_SESSION minutes more of training (train.py --resume) towards DEMO_MINUTES in all,
#   4. copies what must come back into $OUT: small.pt (bf16, ~15 MiB), tokenizer.model,
#      the log, final.json once training has ended; small.pt and the log also while it
#      trains (every 15 s), so that a call killed at its limit still brings them back.
# Everything is reproducible from the seed, so a fresh machine (the old one given back) only
# needs .demo/espeak (carry it) and, to go on, the last small.pt carried as
# .demo/resume/small.pt: it is used when .demo/ckpt has no full.pt of its own. (Which clips
# a step sees while the data still grow depends on timing. Finished data on a warm machine
# are reused as they are, whatever DEMO_PERTURB says now.)
# Why this shape: the machine has no network and no espeak-ng (espeak_bundle.sh makes the
# bundle here), what travels is 64 MiB each way, and a command runs at most 10 minutes.
# Not here: export and evaluation (export.py, eval.py: here, on the CPU, with our engine).
#
# usage (on the GPU machine, from the repository root): sh tools/train-demo/h200.sh
#   env: DEMO_CLIPS (120000) DEMO_MINUTES (18) DEMO_SESSION (8) DEMO_SIZE (demo)
#        DEMO_PERTURB (data.py --speed-perturb, 0) DEMO_NAMED (data.py --named, 0)
#        DEMO_ARGS (more train.py flags)
#        OUT (where to put what comes back; the run tool sets it)
set -eu
cd "$(dirname "$0")/../.."
D=.demo
OUT=${OUT:-$D/out}
CLIPS=${DEMO_CLIPS:-120000}
MINUTES=${DEMO_MINUTES:-18}
SESSION=${DEMO_SESSION:-8}
SIZE=${DEMO_SIZE:-demo}
mkdir -p "$OUT" "$D/ckpt"
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
        jobs=$(($(nproc) > 4 ? $(nproc) - 2 : 2))
        log "synthesising $CLIPS clips on $jobs cores, beside the training"
        nohup python3 tools/train-demo/data.py --out "$D/data" --train "$CLIPS" --heldout 200 --seed 1 \
            --jobs "$jobs" --shard 2000 --keep --speed-perturb "${DEMO_PERTURB:-0}" --named "${DEMO_NAMED:-0}" >> "$D/data.log" 2>&1 < /dev/null &
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
if [ ! -f "$D/ckpt/full.pt" ] && [ -f "$D/resume/small.pt" ]; then
    log "going on from the carried $D/resume/small.pt"
    cp "$D/resume/small.pt" "$D/ckpt/small.pt"
fi
log "training ($SESSION min of $MINUTES)"
n0=$(cat "$D/ckpt/train.log" 2>/dev/null | wc -l)
# Copy each new checkpoint and the log into $OUT as they come: a call killed at its time
# limit (which is the device time left, when that is less than asked) still brings back
# what $OUT holds, so at most save-every steps are lost.
cp "$D/data/tokenizer.model" "$OUT/"
( while sleep 15; do
      if [ "$D/ckpt/small.pt" -nt "$OUT/small.pt" ] 2>/dev/null || [ ! -f "$OUT/small.pt" ]; then
          { [ -f "$D/ckpt/small.pt" ] && cp "$D/ckpt/small.pt" "$OUT/small.pt.part" && mv "$OUT/small.pt.part" "$OUT/small.pt"; } || true
      fi
      cp "$D/ckpt/train.log" "$OUT/" 2>/dev/null || true
      tail -n 3 "$D/data.log" > "$OUT/data.log" 2>/dev/null || true
  done ) &
mirror=$!
trap 'kill $mirror 2>/dev/null' EXIT
# shellcheck disable=SC2086
python3 tools/train-demo/train.py --data "$D/data" --tokenizer "$D/data/tokenizer.model" --out "$D/ckpt" \
    --size "$SIZE" --minutes "$MINUTES" --session-minutes "$SESSION" --resume --threads 2 --eval-every 2000 --save-every 500 $GROW ${DEMO_ARGS:-} \
    >> "$D/ckpt/train.log" 2>&1 || { tail -n 40 "$D/ckpt/train.log"; exit 1; }
tail -n +"$((n0 + 1))" "$D/ckpt/train.log" | grep -v "Warning\|warn(" | tail -n 120
cp "$D/ckpt/small.pt" "$D/data/tokenizer.model" "$D/ckpt/train.log" "$OUT/"
[ -f "$D/data/meta.json" ] && cp "$D/data/meta.json" "$OUT/"
tail -n 3 "$D/data.log" > "$OUT/data.log" 2>/dev/null || true
if [ -f "$D/ckpt/final.json" ]; then
    cp "$D/ckpt/final.json" "$OUT/"
    log "done: training ended; $OUT has small.pt, tokenizer.model, final.json"
else
    log "not done yet: run again"
fi
