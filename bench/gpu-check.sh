#!/bin/sh
# GPU check: on a machine with an NVIDIA GPU, builds hotset with CUDA for
# that GPU, runs the device contract tests and `run-layer --device cuda` on
# the shared tiny model, then benchmarks the device (bench/bench-device.c):
# decode kernel GB/s against device-to-device copies, prefill TFLOP/s,
# pinned H2D against the PCIe link, masked-skip proportionality.  Writes the
# full log to bench/results/gpu-check-DATE-COMMIT.txt and prints a short
# table last, then `hotset bench` on the device.  Meant to finish in under 8
# minutes.
# usage: bench/gpu-check.sh [BUILD_DIR]   (default build-gpu; sim: DEVICE=sim)
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build-gpu}
device=${DEVICE:-cuda}
commit=$(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo unknown)
stamp=$(date -u +%Y%m%d-%H%M)
mkdir -p "$src/bench/results"
log="$src/bench/results/gpu-check-$stamp-$commit-$device.txt"
status=0
say() { echo "$*" | tee -a "$log"; }
run() { say "\$ $*"; "$@" >>"$log" 2>&1; rc=$?; [ $rc -eq 0 ] || { say "  -> exit $rc"; status=1; }; return $rc; }

: >"$log"
say "# hotset GPU check (measurements)"
say "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
say "commit: $commit"
say "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') ($(nproc) cores)"
if command -v nvidia-smi >/dev/null 2>&1; then
	say "gpu: $(nvidia-smi --query-gpu=name,memory.total,pcie.link.gen.max,pcie.link.width.max,driver_version --format=csv,noheader | head -1)"
	arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '.')
else
	say "gpu: nvidia-smi not found"
	arch=
fi
[ "$device" = sim ] && arch=

if [ ! -x "$build/hotset" ]; then
	mkdir -p "$build"
	(cd "$src" && [ -x configure ] || autoreconf -fi) >>"$log" 2>&1
	if [ -n "$arch" ]; then
		(cd "$build" && run "$src/configure" --enable-werror --with-cuda-arch="$arch")
	else
		(cd "$build" && run "$src/configure" --enable-werror)
	fi
fi
# the library, the command, the benchmark and the test programs (TESTS= builds them, runs none)
run make -C "$build" -j"$(nproc)" all && run make -C "$build" -j"$(nproc)" check TESTS= ||
	{ say "build failed: see $log"; exit 1; }
run "$build/hotset" --version

say "== device contract tests ($device)"
HS_TEST_DEVICE=$device top_srcdir=$src run "$build/tests/test-device"
M=$src/tests/data/models
for L in 0 1; do
	run "$build/hotset" run-layer --model "$M/gptoss-tiny-h256-e32.gguf" --layer $L \
		--input "$M/x-h256-n4.npy" --output "$build/gpu-y$L.npy" --device "$device" &&
		run "$build/tests/npy-cmp" "$build/gpu-y$L.npy" "$M/y-h256-n4-layer$L.npy" 5e-2
done

say "== benchmark ($device)"
"$build/bench/bench-device" "$device" 32 >"$build/bench-device.out" 2>&1 || status=1
cat "$build/bench-device.out" >>"$log"
say ""
sed -n '/^measurement/,$p' "$build/bench-device.out"
say ""
say "== hotset bench ($device): every mode, measured against predicted"
XDG_CACHE_HOME="$build/cache" "$build/hotset" bench --device "$device" -q >"$build/bench.out" 2>&1 || status=1
cat "$build/bench.out" | tee -a "$log"
say "full log: $log"
[ $status -eq 0 ] && say "gpu-check: all steps passed" || say "gpu-check: some steps FAILED (see the log)"
exit $status
