#!/bin/sh
# GPU check: on a machine with an NVIDIA GPU, builds hotset with CUDA for
# that GPU, runs the device contract tests and `run-layer --device cuda` on
# the shared tiny model, the whole model's dense ops against their CPU
# twins on the device (tests/test-device-dense) and the logits tests'
# device part on it (tests/test-logits with HS_TEST_DEVICE), each with
# cuBLAS and without (HOTSET_CUBLAS=0: the tile kernels), `hotset run` on
# an oracle file, then benchmarks the device (bench/bench-device.c): decode
# kernel GB/s against device-to-device copies, prefill TFLOP/s, pinned H2D
# against the PCIe link, masked-skip proportionality; `hotset bench` (the
# MoE modes) and `hotset bench --e2e` (the whole model, pp512 / tg128).
# Writes the full log, raw output included, to
# bench/results/gpu-check-DATE-COMMIT.txt and prints a short table last.
# Meant to finish in under 10 minutes.
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

say "== the whole model's dense ops on the device, against the CPU ops' double twins ($device)"
D=$src/tests/data
for blas in 1 0; do # cuBLAS for the float-weight prefill products, then the tile kernels
	[ $blas = 0 ] && { [ "$device" = cuda ] || break; say "-- without cuBLAS (HOTSET_CUBLAS=0)"; }
	HOTSET_CUBLAS=$blas HS_TEST_DEVICE=$device HS_DATA=$D run "$build/tests/test-device-dense"
	say "-- logits against the oracles, dense part on the device ($device)"
	HOTSET_CUBLAS=$blas HS_TEST_DEVICE=$device HS_TEST_DEVICE_ONLY=1 HS_DATA=$D run "$build/tests/test-logits"
done
grep -E "^(gptoss|qwen3).* $device, " "$log" | tail -n 60
O=$D/oracle/gptoss-l2-h256-swa128-f16
run "$build/hotset" run --model "$O.gguf" --tokens "$(cut -d' ' -f1-64 "$O.tokens.txt")" -n 32 --device "$device"

say "== benchmark ($device)"
"$build/bench/bench-device" "$device" 32 >"$build/bench-device.out" 2>&1 || status=1
cat "$build/bench-device.out" >>"$log"
say ""
sed -n '/^measurement/,$p' "$build/bench-device.out"
say ""
say "== hotset bench ($device): every mode, measured against predicted"
XDG_CACHE_HOME="$build/cache" "$build/hotset" bench --device "$device" -q >"$build/bench.out" 2>&1 || status=1
cat "$build/bench.out" | tee -a "$log"
say ""
say "== hotset bench --e2e ($device): the whole model, pp512 and tg128"
XDG_CACHE_HOME="$build/cache" "$build/hotset" bench --e2e --devices "$device" -q >"$build/bench-e2e.out" 2>&1 || status=1
cat "$build/bench-e2e.out" | tee -a "$log"
say "full log: $log"
[ $status -eq 0 ] && say "gpu-check: all steps passed" || say "gpu-check: some steps FAILED (see the log)"
exit $status
