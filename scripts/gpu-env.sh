#!/usr/bin/env bash
# gpu-env.sh: sourced by scripts/gpu-check.sh and bench/gpu-vs-transformers.sh
# on a GPU machine. When the build's Debian libraries (cJSON, OpenBLAS, soxr,
# pkg-config) are missing there (no network to install them), unpacks them
# from .debs/tg-deps.txz (made here by scripts/gpu-deps.sh, carried,
# git-ignored) into a private prefix and points pkg-config, CMake and the
# loader at it. Calls `row` when the caller defines it.
if ! pkg-config --exists libcjson soxr 2>/dev/null || [ ! -e /usr/include/cjson/cJSON.h ]; then
  if [ -f .debs/tg-deps.txz ]; then
    # Debian's libcjson, libopenblas0-pthread, libsoxr, libgfortran5, pkgconf
    # (and their -dev parts), unpacked with dpkg -x, static libraries dropped.
    P=/tmp/tg-deps
    mkdir -p $P
    python3 -c "import tarfile; tarfile.open('.debs/tg-deps.txz').extractall('$P')"
    for pc in $P/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc $P/usr/lib/x86_64-linux-gnu/openblas-pthread/pkgconfig/*.pc; do
      [ -f "$pc" ] && sed -i "s|=/usr|=$P/usr|g" "$pc"
    done
    L=$P/usr/lib/x86_64-linux-gnu
    export PKG_CONFIG_PATH=$L/pkgconfig
    export CMAKE_LIBRARY_PATH=$L/openblas-pthread:$L
    export CMAKE_INCLUDE_PATH=$P/usr/include/x86_64-linux-gnu/openblas-pthread:$P/usr/include
    export LD_LIBRARY_PATH=$L/openblas-pthread:$L${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    if ! command -v pkg-config >/dev/null; then
      export PATH=$P/usr/bin:$PATH
      ln -sf $P/usr/bin/pkgconf $P/usr/bin/pkg-config
    fi
    # the system's libgfortran when it has one; ours otherwise
    if ldconfig -p | grep -q libgfortran.so.5; then rm -f $L/libgfortran.so.5*; fi
    if declare -F row >/dev/null; then row "dependencies" "unpacked from .debs/tg-deps.txz"; fi
  fi
fi

