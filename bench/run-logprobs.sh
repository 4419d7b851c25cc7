#!/bin/sh
# The logprobs cost benchmark (bench/bench-logprobs.c) with its raw output
# kept in bench/results/logprobs-DATE-COMMIT.txt.
# usage: bench/run-logprobs.sh BUILD_DIR [VOCAB] [REPS]
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: run-logprobs.sh BUILD_DIR [VOCAB] [REPS]}" && pwd)
shift
. "$src/bench/results.sh"
results_open logprobs "hotset logprobs cost per token (measurements)" "bench-logprobs $*"
"$build/bench/bench-logprobs" "$@" >>"$out.txt"
cat "$out.txt"
echo "raw output: $out.txt"
