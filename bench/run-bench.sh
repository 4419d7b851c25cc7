#!/bin/sh
# Runs `hotset bench` and keeps its raw output, with the machine and the
# commit, in bench/results/bench-DATE-COMMIT.{txt,csv,svg}.
# usage: bench/run-bench.sh BUILD_DIR [hotset bench flags...]
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: run-bench.sh BUILD_DIR [flags]}" && pwd)
shift
. "$src/bench/results.sh"
results_open bench "hotset bench (measurements, with the cost model's predictions)" "hotset bench --csv FILE.csv --plot FILE.svg $*"
echo >>"$out.txt"
start=$(date +%s)
"$build/hotset" bench --csv "$out.csv" --plot "$out.svg" "$@" >>"$out.txt"
echo "(wall time of the run, model generation included when it happened: $(($(date +%s) - start)) s)" >>"$out.txt"
cat "$out.txt"
echo "raw output: $out.txt, $out.csv, $out.svg"
