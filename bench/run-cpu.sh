#!/bin/sh
# Runs one of the CPU benchmarks (bench-kernels, bench-dense) and keeps its
# raw output, with the machine and the commit, in
# bench/results/KIND-DATE-COMMIT.{txt,json}.
# usage: bench/run-cpu.sh KIND BUILD_DIR [flags...]   (KIND: kernels or dense)
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
kind=${1:?usage: run-cpu.sh kernels|dense BUILD_DIR [flags]}
build=$(cd "${2:?usage: run-cpu.sh kernels|dense BUILD_DIR [flags]}" && pwd)
shift 2
. "$src/bench/results.sh"
results_open "$kind" "hotset CPU $kind benchmark (measurements)" "bench-$kind --json $*"
{
	echo "OMP_PROC_BIND=${OMP_PROC_BIND:-true} OMP_PLACES=${OMP_PLACES:-cores}"
	echo
} >>"$out.txt"
OMP_PROC_BIND=${OMP_PROC_BIND:-true} OMP_PLACES=${OMP_PLACES:-cores} \
	"$build/bench/bench-$kind" --json "$@" >"$out.json" 2>>"$out.txt"
cat "$out.txt"
echo "raw output: $out.txt, $out.json"
