#!/bin/sh
# Runs the dense CPU ops benchmark and keeps its raw output, with the machine
# and the commit, in bench/results/dense-DATE-COMMIT.{txt,json}.
# usage: bench/run-dense.sh BUILD_DIR [bench-dense flags...]
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: run-dense.sh BUILD_DIR [flags]}" && pwd)
shift
. "$src/bench/results.sh"
results_open dense "hotset dense CPU ops benchmark (measurements)" "bench-dense --json $*"
{
	echo "OMP_PROC_BIND=${OMP_PROC_BIND:-true} OMP_PLACES=${OMP_PLACES:-cores}"
	echo
} >>"$out.txt"
OMP_PROC_BIND=${OMP_PROC_BIND:-true} OMP_PLACES=${OMP_PLACES:-cores} \
	"$build/bench/bench-dense" --json "$@" >"$out.json" 2>>"$out.txt"
cat "$out.txt"
echo "raw output: $out.txt, $out.json"
