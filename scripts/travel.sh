#!/bin/sh
# travel.sh: what goes to the GPU machine. The device tool sends the working tree (tracked
# and untracked-not-ignored files, and the carried paths), at most 64 MiB a call; the tree
# holds more than that once the demo model (models/cohere-demo-en, 15 MB) and its test clips
# are in it. None of the GPU runs (scripts/gpu-check.sh, bench/, tools/train-demo/h200.sh)
# reads those, so before a device call `slim` takes them out of the index and ignores them
# locally (.git/info/exclude): they stay on disk, untouched, but do not travel. `full` puts
# them back exactly as HEAD has them. Do not commit while slim: the commit would delete them
# (`status` says which state the tree is in; a commit while slim is refused by the hook that
# `slim` installs). `slim train` also leaves out the fixtures under tests/data (45 MB): the
# demo model's training (tools/train-demo/h200.sh) reads none of them, and it carries a 16 MB
# checkpoint to go on from, which would not fit beside them.
#
# usage: scripts/travel.sh status | slim [train] | full      (from anywhere in the repository)
# Not here: what each call carries (name .debs, .demo/espeak, ... in the tool's carry).
set -eu
cd "$(git rev-parse --show-toplevel)"
PATHS="models/cohere-demo-en tests/data/demo fuzz/corpus"
TRAIN_PATHS="tests/data/tiny tests/data/small2"
MARK="# travel.sh slim"
EXCL=$(git rev-parse --git-path info/exclude)
HOOK=$(git rev-parse --git-path hooks)/pre-commit

size() {
    git ls-files -co --exclude-standard -z | xargs -0 -r stat -c %s 2>/dev/null |
        awk '{ s += $1 } END { printf "%.1f MiB", s / 1048576 }'
}

case "${1:-status}" in
status)
    if grep -qF "$MARK" "$EXCL" 2>/dev/null; then state=slim; else state=full; fi
    echo "travel: $state; the tree that travels is $(size) (limit 64 MiB, carried paths on top)"
    ;;
slim)
    if grep -qF "$MARK" "$EXCL" 2>/dev/null; then
        if [ "${2:-}" = train ] && ! grep -qxF "/tests/data/tiny/" "$EXCL"; then
            echo "travel: slim without the training paths; run scripts/travel.sh full, then slim train" >&2
            exit 1
        fi
        echo "travel: already slim"
        exit 0
    fi
    [ "${2:-}" = train ] && PATHS="$PATHS $TRAIN_PATHS"
    git diff --quiet HEAD -- $PATHS || { echo "travel: uncommitted changes under $PATHS; commit them first" >&2; exit 1; }
    mkdir -p "$(dirname "$EXCL")" "$(dirname "$HOOK")"
    git rm -r -q --cached --ignore-unmatch -- $PATHS
    { echo "$MARK"; for p in $PATHS; do echo "/$p/"; done; echo "$MARK end"; } >> "$EXCL"
    if [ ! -e "$HOOK" ]; then
        printf '#!/bin/sh\n# installed by scripts/travel.sh\nif grep -qF "%s" "$(git rev-parse --git-path info/exclude)"; then\n    echo "pre-commit: the tree is slim (scripts/travel.sh); run scripts/travel.sh full first" >&2\n    exit 1\nfi\n' "$MARK" > "$HOOK"
        chmod +x "$HOOK"
    fi
    echo "travel: slim; the tree that travels is $(size); scripts/travel.sh full puts $PATHS back"
    ;;
full)
    git reset -q HEAD -- $PATHS $TRAIN_PATHS
    if grep -qF "$MARK" "$EXCL" 2>/dev/null; then
        sed -i "/^$MARK\$/,/^$MARK end\$/d" "$EXCL"
    fi
    echo "travel: full; the tree that travels is $(size)"
    ;;
*)
    echo "usage: scripts/travel.sh status | slim [train] | full" >&2
    exit 2
    ;;
esac
