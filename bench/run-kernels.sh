#!/bin/sh
# Runs the CPU kernel benchmark and keeps its raw output, with the machine
# and the commit, in bench/results/kernels-DATE-COMMIT.{txt,json}.
# usage: bench/run-kernels.sh BUILD_DIR [bench-kernels flags...]
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: run-kernels.sh BUILD_DIR [flags]}" && pwd)
shift
. "$src/bench/results.sh"
results_open kernels "hotset CPU kernel benchmark (measurements)" "bench-kernels --json $*"
{
	echo "OMP_PROC_BIND=${OMP_PROC_BIND:-true} OMP_PLACES=${OMP_PLACES:-cores}"
	echo
} >>"$out.txt"
OMP_PROC_BIND=${OMP_PROC_BIND:-true} OMP_PLACES=${OMP_PLACES:-cores} \
	"$build/bench/bench-kernels" --json "$@" >"$out.json" 2>>"$out.txt"
cat "$out.txt"
echo "raw output: $out.txt, $out.json"
