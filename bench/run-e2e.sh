#!/bin/sh
# Runs `hotset bench --e2e` (the whole model: pp and tg tokens/s) and keeps
# its raw output, with the machine and the commit, in
# bench/results/e2e-DATE-COMMIT.txt.  With LLAMA_BENCH set to a llama.cpp
# llama-bench binary, each round also runs it on the same model file, right
# after hotset, and the summary gives the ratio of each round (the machine
# drifts: compare within a round, not across).
# usage: bench/run-e2e.sh BUILD_DIR [ROUNDS] [hotset bench --e2e flags...]
#   LLAMA_BENCH=/path/llama-bench LLAMA_THREADS=2 bench/run-e2e.sh build 3
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: run-e2e.sh BUILD_DIR [ROUNDS] [flags]}" && pwd)
rounds=${2:-3}
shift
[ $# -gt 0 ] && shift
. "$src/bench/results.sh"
results_open e2e "hotset bench --e2e (measurements), beside llama-bench when given" \
	"hotset bench --e2e --devices cpu $*${LLAMA_BENCH:+; $LLAMA_BENCH -p 512 -n 128 -t ${LLAMA_THREADS:-2}}"
threads=${LLAMA_THREADS:-2}
model=$("$build/hotset" bench --e2e --devices cpu --reps 1 --pp 8 --tg 2 -q "$@" | sed -n 's/^model: \([^ ]*\) .*/\1/p')
{
	echo "model file: $model"
	env | grep '^HOTSET_' | sed 's/^/environment: /' || true
	[ -n "${LLAMA_BENCH:-}" ] && echo "llama-bench: $LLAMA_BENCH (threads $threads, OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-default})"
	echo
} >>"$out.txt"
summary=""
r=1
while [ "$r" -le "$rounds" ]; do
	echo "## round $r: hotset" >>"$out.txt"
	"$build/hotset" bench --e2e --devices cpu -q "$@" >"$out.round" 2>&1
	cat "$out.round" >>"$out.txt"
	hpp=$(awk '$1 == "cpu" {print $3}' "$out.round")
	htg=$(awk '$1 == "cpu" {print $5}' "$out.round")
	line="round $r: hotset pp $hpp tg $htg"
	if [ -n "${LLAMA_BENCH:-}" ]; then
		echo "## round $r: llama-bench" >>"$out.txt"
		"$LLAMA_BENCH" -m "$model" -p 512 -n 128 -t "$threads" -r 5 -o md >"$out.round" 2>&1 || true
		cat "$out.round" >>"$out.txt"
		lpp=$(awk -F'|' '/pp512/ {gsub(/ /, "", $(NF-1)); split($(NF-1), a, "±"); print a[1]}' "$out.round")
		ltg=$(awk -F'|' '/tg128/ {gsub(/ /, "", $(NF-1)); split($(NF-1), a, "±"); print a[1]}' "$out.round")
		line="$line; llama.cpp pp $lpp tg $ltg; ratio pp $(awk -v a="$hpp" -v b="$lpp" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "?" }') tg $(awk -v a="$htg" -v b="$ltg" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "?" }')"
	fi
	summary="$summary$line
"
	r=$((r + 1))
done
rm -f "$out.round"
{
	echo "## summary (measurements, tokens/s; ratios within each round)"
	printf '%s' "$summary"
} >>"$out.txt"
cat "$out.txt"
echo "raw output: $out.txt"
