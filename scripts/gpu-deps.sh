#!/usr/bin/env bash
# gpu-deps.sh: packs the Debian libraries the build needs (cJSON, OpenBLAS,
# soxr, libgfortran, pkgconf, with their headers) into .debs/tg-deps.txz, for
# a GPU machine that has the CUDA toolkit but cannot install packages (no
# network there). scripts/gpu-check.sh unpacks it into a private prefix when
# the machine lacks them. Run here, in the repository root; .debs/ is ignored
# by git and travels with the device tool's `carry`.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p .debs "$work/debs" "$work/root"
(cd "$work/debs" && apt-get download libcjson1 libcjson-dev libopenblas0-pthread \
    libopenblas-pthread-dev libopenblas-dev libopenblas0 libsoxr0 libsoxr-lsr0 libsoxr-dev \
    libgfortran5 pkgconf pkgconf-bin libpkgconf3)
for d in "$work"/debs/*.deb; do dpkg -x "$d" "$work/root"; done
# static libraries and documentation are not needed to link
find "$work/root" \( -name '*.a' -o -path '*/share/doc/*' -o -path '*/share/man/*' \) -delete
tar -C "$work/root" -cJf .debs/tg-deps.txz .
ls -l .debs/tg-deps.txz
