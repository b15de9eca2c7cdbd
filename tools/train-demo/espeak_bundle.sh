#!/bin/sh
# espeak_bundle.sh: gathers espeak-ng (binary, libraries, English data only)
# into one small folder that runs on a machine without espeak-ng or network
# (the GPU machine), from Debian's own packages: apt-get download + dpkg -x.
#
# Why this shape: the GPU machine cannot install packages, and what travels
# there is at most 64 MiB in all. The full espeak-ng-data is 13 MB; English
# needs about 1.5 MB of it. libpcaudio (sound output, which pulls ALSA and
# PulseAudio, ~10 MB) is replaced by pcaudio_stub.c: writing WAV files never
# opens a device. glibc is the target's own.
# Not here: other languages, mbrola voices, playing sound.
#
# usage: tools/train-demo/espeak_bundle.sh [OUT]   (default .demo/espeak, run as root
#        or with apt-get download allowed; needs cc)
# then:  OUT/espeak-ng -v en-us -w x.wav "hello"   (a wrapper that sets the paths)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/../../.demo/espeak}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -rf "$out/bin" "$out/lib" "$out/espeak-ng-data" "$out/espeak-ng"
(cd "$tmp" && apt-get download espeak-ng libespeak-ng1 espeak-ng-data libsonic0 >/dev/null 2>&1) || {
    echo "apt-get download failed (run apt-get update first?)" >&2; exit 1; }
for d in "$tmp"/*.deb; do dpkg -x "$d" "$tmp/root"; done
r=$tmp/root
mkdir -p "$out/bin" "$out/lib" "$out/espeak-ng-data"
cp "$r/usr/bin/espeak-ng" "$out/bin/"
cp -L "$r/usr/lib/x86_64-linux-gnu/libespeak-ng.so.1" "$r/usr/lib/x86_64-linux-gnu/libsonic.so.0" "$out/lib/"
cc -O2 -shared -fPIC -Wl,-soname,libpcaudio.so.0 -o "$out/lib/libpcaudio.so.0" "$here/stub/pcaudio_stub.c"
D=$r/usr/lib/x86_64-linux-gnu/espeak-ng-data
cp -r "$D/phondata" "$D/phonindex" "$D/phontab" "$D/intonations" "$D/en_dict" "$out/espeak-ng-data/"
mkdir -p "$out/espeak-ng-data/lang/gmw" "$out/espeak-ng-data/voices"
cp "$D"/lang/gmw/en* "$out/espeak-ng-data/lang/gmw/"
cp -r "$D/voices/!v" "$out/espeak-ng-data/voices/"
cat > "$out/espeak-ng" <<'EOS'
#!/bin/sh
d=$(cd "$(dirname "$0")" && pwd)
LD_LIBRARY_PATH="$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ESPEAK_DATA_PATH="$d" exec "$d/bin/espeak-ng" "$@"
EOS
chmod +x "$out/espeak-ng"
"$out/espeak-ng" -v en-us -w "$tmp/check.wav" "bundle check" && test -s "$tmp/check.wav"
echo "$out: $(du -sk "$out" | cut -f1) KiB, $(find "$out" -type f | wc -l) files; espeak-ng runs"
