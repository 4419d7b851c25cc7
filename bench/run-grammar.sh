#!/bin/sh
# The grammar cost benchmark (bench/bench-grammar.c) on gpt-oss's vocabulary,
# with its raw output kept in bench/results/grammar-DATE-COMMIT.txt.
# usage: bench/run-grammar.sh BUILD_DIR [REPEATS]
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: run-grammar.sh BUILD_DIR [REPEATS]}" && pwd)
shift
. "$src/bench/results.sh"
results_open grammar "hotset grammar mask cost per token (measurements)" "bench-grammar $*"
"$build/bench/bench-grammar" "$src/tests/data/vocab/gptoss-o200k-harmony-vocab.gguf" "$@" >>"$out.txt"
cat "$out.txt"
echo "raw output: $out.txt"
