#!/bin/sh
# fix-includes.sh: rewrites includes of project headers written as a path
# from src/ ("model/model.h", "backend/cuda/cuda_internal.h", also inside the
# generated-C strings of *.cmake) to the bare file name ("model.h") that the
# layered build resolves through each target's include path (see the top of
# CMakeLists.txt), then sorts each run of consecutive quoted includes that it
# changed so the blocks stay in alphabetical order.
#
# Idempotent: run it after merging code written against the old scheme
# (`scripts/fix-includes.sh`, from anywhere); it edits only files that still
# hold such includes, lists them, and touches nothing else. Includes of
# subfolders that are not layers ("kernels/..."), system headers and bare
# names are left alone. Not here: choosing tg_status.h over tg.h, which is a
# judgement per file.
set -eu
cd "$(dirname "$0")/.."

layers='base|tensor|model|audio|asr|backend/cpu|backend/cuda'
# `#include "dir/x.h"` at the start of a line, or `#include \"dir/x.h\"` anywhere
# (the C text that *.cmake files generate)
inc='#[[:space:]]*include[[:space:]]+'
pattern="(^[[:space:]]*$inc\"|$inc\\\\\")($layers)/[A-Za-z0-9_.]+\\.h"

git ls-files -co --exclude-standard -- src tools tests bench fuzz include \
        '*.c' '*.h' '*.cmake' '*.cu' '*.cuh' |
    sort -u |
    while IFS= read -r f; do
        [ -f "$f" ] || continue
        grep -qE "$pattern" "$f" || continue
        sed -E -i "s@(^[[:space:]]*$inc\"|$inc\\\\\")($layers)/([A-Za-z0-9_.]+\\.h)@\\1\\3@g" "$f"
        # sort runs of consecutive `#include "..."` lines (C sources only;
        # the *.cmake strings are single lines)
        case "$f" in
        *.c | *.h)
            awk '
                function flush() {
                    if (!n) return
                    fflush()
                    for (i = 1; i <= n; i++) print run[i] | "LC_ALL=C sort"
                    close("LC_ALL=C sort")
                    n = 0
                }
                /^#include "/ { run[++n] = $0; next }
                { flush(); print }
                END { flush() }' "$f" >"$f.fix-includes"
            cat "$f.fix-includes" >"$f" && rm "$f.fix-includes"
            ;;
        esac
        echo "$f"
    done
