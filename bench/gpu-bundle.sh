#!/bin/sh
# Builds the GPU bundle: hotset's command, the device tests and the
# benchmarks compiled here with CUDA, stripped, with the shared libraries a
# bare image lacks, the small test files and bench/gpu-check.sh as run.sh,
# in one folder that runs on any x86-64 Linux machine with an NVIDIA driver
# and nothing else installed (docs/device.md, "The GPU bundle").
#
# usage: bench/gpu-bundle.sh [BUILD_DIR]
#   BUILD_DIR  a build tree configured with CUDA (`make gpu-bundle` passes its
#              own); default build-bundle, configured here when it has no
#              Makefile, for the architectures in $HS_BUNDLE_ARCHS (default
#              "80 90": sm_80 code runs on every Ampere and Ada GPU, sm_90 on
#              Hopper, the PTX of the newest is compiled by the driver for
#              later ones; each program carries every kernel, about 1.6 MiB
#              of machine code per architecture, so the five of a plain
#              build, "75 80 86 89 90", would pass the size limit)
# Writes $HS_BUNDLE_DIR (default gpu-bundle/ in the source tree, ignored by
# git) and checks that it stays under the device tool's 64 MiB.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build-bundle}
out=${HS_BUNDLE_DIR:-$src/gpu-bundle}
limit_mib=60 # the device tool carries 64 MiB in all

if [ ! -f "$build/Makefile" ]; then
	mkdir -p "$build"
	[ -x "$src/configure" ] || (cd "$src" && autoreconf -fi)
	echo "gpu-bundle: configuring $build (CUDA, sm: ${HS_BUNDLE_ARCHS:-80 90})"
	(cd "$build" && "$src/configure" --with-cuda --with-cuda-arch="${HS_BUNDLE_ARCHS:-80 90}" >configure.out) ||
		{ echo "gpu-bundle: configure failed (see $build/config.log)" >&2; exit 1; }
fi
grep -q '^#define HS_CUDA_VERSION' "$build/config.h" 2>/dev/null ||
	{ echo "gpu-bundle: $build was configured without CUDA (configure --with-cuda)" >&2; exit 1; }
progs="hotset tests/test-device tests/test-device-dense tests/test-logits tests/test-cuda-nodriver tests/npy-cmp bench/bench-device"
jobs=${HS_BUNDLE_JOBS:-2}
make -C "$build" -j"$jobs" all >/dev/null
make -C "$build" -j"$jobs" $(echo "$progs" | sed 's/hotset//') >/dev/null

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/data/models"
for p in $progs; do
	f=$build/$p
	[ -f "$f" ] && ! grep -q 'libtool' "$f" 2>/dev/null ||
		{ echo "gpu-bundle: $f is missing or a libtool wrapper" >&2; exit 1; }
	cp "$f" "$out/bin/"
	strip --strip-unneeded "$out/bin/$(basename "$p")"
done
# Shared libraries outside glibc (a bare image has glibc, not hwloc, jansson,
# libmicrohttpd, libnuma, libgomp or what they pull in); never the driver
# (libcuda comes with the machine) nor cuBLAS (located at run time).
for f in "$out"/bin/*; do ldd "$f"; done | sed -n 's/^[[:space:]]*\([^ ]*\) => \(\/[^ ]*\) .*/\1 \2/p' | sort -u |
	while read -r name path; do
		case $name in
		libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | libresolv.so.* | libutil.so.* | ld-linux*) ;;
		libcuda.so.* | libnvidia-* | libcublas*) ;;
		*) cp -L "$path" "$out/lib/$name" ;;
		esac
	done
strip --strip-unneeded "$out"/lib/* 2>/dev/null || true
# the small files the tests and run-layer read; the oracles (88 MiB) stay in
# the checkout: run.sh finds them through HS_DATA or skips test-logits
cp "$src"/tests/data/models/*.gguf "$src"/tests/data/models/*.npy "$out/data/models/"
cp "$src/bench/gpu-check.sh" "$out/run.sh"
chmod +x "$out/run.sh"
{
	echo "commit $(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$src" diff --quiet 2>/dev/null || echo ' (with local changes)')"
	echo "built $(date -u '+%Y-%m-%d %H:%M UTC') on $(uname -srm), $(ldd --version | head -n 1)"
	grep -E '^#define HS_CUDA_(VERSION|ARCHS)' "$build/config.h" | sed 's/^#define //'
	echo "programs: $progs"
	echo "libraries: $(cd "$out/lib" && echo *)"
} >"$out/MANIFEST"
mib=$(du -sm "$out" | cut -f1)
cat "$out/MANIFEST"
echo "gpu-bundle: $out, $mib MiB"
if [ "$mib" -gt "$limit_mib" ]; then
	echo "gpu-bundle: over ${limit_mib} MiB: the device tool would not carry it (fewer archs: HS_BUNDLE_ARCHS=90)" >&2
	exit 1
fi
echo "run it on a machine with an NVIDIA GPU: OUT=DIR $out/run.sh   (device tool: carry [\"gpu-bundle\"], command gpu-bundle/run.sh, HS_DATA=tests/data for the oracles)"
