#!/bin/sh
# The whole model beside llama.cpp on the same file: rounds of `hotset bench
# --e2e --model FILE` (pp and tg tokens/s, with this machine's read bandwidth
# measured in the same run) then `llama-bench -m FILE` with the same prompt,
# generation length and threads; the ratio per round compares runs next to
# each other in time.  Made for K-quant files (e.g. a Qwen3-30B-A3B-shaped
# Q4_K_M: `hotset gen --preset qwen3-30b-a3b --layers 4 --type bf16
# --dense-type bf16 -o m.gguf`, then llama.cpp's `llama-quantize m.gguf
# q.gguf Q4_K_M`).  Each run takes /tmp/hs-bench.lock.  Raw output:
# bench/results/llama-e2e-*.
# usage: bench/run-llama-e2e.sh BUILD_DIR LLAMA_BENCH MODEL [ROUNDS] [PP] [TG] [THREADS]
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: run-llama-e2e.sh BUILD_DIR LLAMA_BENCH MODEL [ROUNDS] [PP] [TG] [THREADS]}" && pwd)
llama=${2:?the llama-bench binary}
model=${3:?a GGUF model file}
rounds=${4:-3}
pp=${5:-512}
tg=${6:-64}
thr=${7:-2}
. "$src/bench/results.sh"
results_open llama-e2e "hotset bench --e2e beside llama-bench on one file (measurements)" \
	"run-llama-e2e.sh: $rounds rounds, $model, pp$pp tg$tg, $thr threads"
{
	echo "llama-bench: $("$llama" --version 2>&1 | head -1)"
	"$build/hotset" model "$model" | grep -E 'types|file type'
	echo "other work may have run beside these runs"
	echo
} >>"$out.txt"
r=1
while [ "$r" -le "$rounds" ]; do
	echo "== round $r hotset:" >>"$out.txt"
	flock /tmp/hs-bench.lock "$build/hotset" bench --e2e --model "$model" --devices cpu --pp "$pp" --tg "$tg" \
		--reps 2 --threads "$thr" -q >>"$out.txt" 2>&1
	echo "== round $r llama.cpp:" >>"$out.txt"
	flock /tmp/hs-bench.lock "$llama" -m "$model" -t "$thr" -p "$pp" -n "$tg" -r 2 >>"$out.txt" 2>&1
	r=$((r + 1))
done
# per round: hotset tok/s / llama.cpp tok/s for pp and tg (llama-bench's
# table: the test in the next-to-last column, "t/s" in the last)
summary() {
	awk -v pp="pp$pp" -v tg="tg$tg" '
function trim(x) { gsub(/^ +| +$/, "", x); return x }
/^== round/ { round = $3; who = $4 }
who == "hotset:" && $1 == "cpu" { hp[round] = $3; ht[round] = $5 }
who == "llama.cpp:" && /^\|/ {
	n = split($0, f, "|"); t = trim(f[n - 2]); split(trim(f[n - 1]), v, " ")
	if (t == pp) lp[round] = v[1]
	if (t == tg) lt[round] = v[1]
}
END {
	print "\nsummary: hotset / llama.cpp tokens per second, per round next to each other in time"
	printf "%5s %10s %10s %8s %10s %10s %8s\n", "round", "hotset pp", "llama pp", "ratio", "hotset tg", "llama tg", "ratio"
	for (r = 1; r in hp; r++)
		printf "%5d %10.1f %10.1f %8.2f %10.2f %10.2f %8.2f\n", r, hp[r], lp[r], lp[r] ? hp[r] / lp[r] : 0,
		       ht[r], lt[r], lt[r] ? ht[r] / lt[r] : 0
}' "$1"
}
summary "$out.txt" >>"$out.txt"
cat "$out.txt"
echo "raw output: $out.txt"
