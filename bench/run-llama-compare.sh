#!/bin/sh
# hotset's mul_mat_id next to llama.cpp's on the gpt-oss-120b expert shape
# (2880 x 2880 MXFP4, 4 of 128 experts per token, fresh experts each step)
# or, for each other type in TYPES, the Qwen3-30B-A3B one (2048 x 768, 8 of
# 128): rounds of bench-kernels --ops mmid (hotset's host-copy layout, the
# tier this machine runs), then bench/results/llama-mmid.c (ggml's
# CPU_REPACK buffer where ggml has a layout for the type, else plain rows,
# as llama.cpp loads them).  The ratio per round compares the two runs next to each other in
# time; the summary gives the median and the range over the rounds.  Each
# run takes /tmp/hs-bench.lock.  Raw output: bench/results/llama-compare-*.
# usage: bench/run-llama-compare.sh BUILD_DIR LLAMA_MMID [ROUNDS] [NS] [THREADS] [TYPES]
#   TYPES: comma-separated, e.g. mxfp4,q4_K,q6_K,iq4_xs (default mxfp4)
#   LLAMA_MMID: the harness built against libggml (see its header comment)
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: run-llama-compare.sh BUILD_DIR LLAMA_MMID [ROUNDS] [NS] [THREADS] [TYPES]}" && pwd)
llama=${2:?the llama-mmid harness}
rounds=${3:-3}
ns=${4:-1,8,32,128,512}
thr=${5:-1,2}
types=${6:-mxfp4}
. "$src/bench/results.sh"
results_open llama-compare "hotset mul_mat_id beside llama.cpp's (measurements)" \
	"run-llama-compare.sh: $rounds rounds of bench-kernels --ops mmid and llama-mmid, n = $ns, threads $thr, types $types"
export OMP_PROC_BIND=${OMP_PROC_BIND:-true} OMP_PLACES=${OMP_PLACES:-cores}
{
	echo "OMP_PROC_BIND=$OMP_PROC_BIND OMP_PLACES=$OMP_PLACES; other work may have run beside these runs"
	echo
} >>"$out.txt"
r=1
while [ "$r" -le "$rounds" ]; do
	for t in $(echo "$types" | tr , ' '); do
		if [ "$t" = mxfp4 ]; then shape="--shapes gpt-oss"; else shape="--shapes qwen3 --types $t"; fi
		echo "== round $r hotset: $t" >>"$out.txt"
		# shellcheck disable=SC2086 # $shape is two or four words
		flock /tmp/hs-bench.lock "$build/bench/bench-kernels" --ops mmid $shape --no-masked --ns "$ns" \
			--threads "$thr" >>"$out.txt" 2>&1
		echo "== round $r llama.cpp: $t" >>"$out.txt"
		flock /tmp/hs-bench.lock "$llama" --type "$t" --ns "$ns" --threads "$thr" >>"$out.txt" 2>&1
	done
	r=$((r + 1))
done
# per round and case: hotset GB/s / llama.cpp GB/s; then median and range
# (fields: shape shape type op n thr tier ms GB/s ...)
awk '
/^== round/ { round = $3; who = $4 }
($1 == "gpt-oss-120b" || $1 == "qwen3-30b-a3b") && $4 == "mmid" {
	key = $3 " " $5 " " $6
	if (who == "hotset:") { h[round, key] = $9; rd[round, key] = $11 } else l[round, key] = $9
	if (!(key in seen)) { seen[key] = 1; order[++nk] = key }
}
END {
	print "\nsummary: hotset GB/s / llama.cpp GB/s, per round next to each other in time; then"
	print "each side GB/s / the read bandwidth bench-kernels measured just before the case (median over the rounds)"
	printf "%-7s %5s %4s  %-30s %7s %7s %7s %8s %8s\n", "type", "n", "thr", "ratio per round", "median", "min", "max",
	       "hs/read", "ll/read"
	for (i = 1; i <= nk; i++) {
		k = order[i]; m = 0; list = ""
		for (r = 1; (r, k) in h; r++)
			if ((r, k) in l && l[r, k] > 0) {
				v[++m] = h[r, k] / l[r, k]; list = list sprintf(" %.2f", v[m])
				hr[m] = rd[r, k] > 0 ? h[r, k] / rd[r, k] : 0; lr[m] = rd[r, k] > 0 ? l[r, k] / rd[r, k] : 0
			}
		for (a = 2; a <= m; a++) # insertion sort of each list
			for (b = a; b > 1 && hr[b - 1] > hr[b]; b--) { t = hr[b]; hr[b] = hr[b - 1]; hr[b - 1] = t }
		for (a = 2; a <= m; a++)
			for (b = a; b > 1 && lr[b - 1] > lr[b]; b--) { t = lr[b]; lr[b] = lr[b - 1]; lr[b - 1] = t }
		for (a = 2; a <= m; a++) # insertion sort
			for (b = a; b > 1 && v[b - 1] > v[b]; b--) { t = v[b]; v[b] = v[b - 1]; v[b - 1] = t }
		med = m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
		hmed = m % 2 ? hr[(m + 1) / 2] : (hr[m / 2] + hr[m / 2 + 1]) / 2
		lmed = m % 2 ? lr[(m + 1) / 2] : (lr[m / 2] + lr[m / 2 + 1]) / 2
		split(k, kk, " ")
		printf "%-7s %5s %4s  %-30s %7.2f %7.2f %7.2f %8.2f %8.2f\n", kk[1], kk[2], kk[3], list, med, v[1], v[m],
		       hmed, lmed
	}
}' "$out.txt" >>"$out.txt"
cat "$out.txt"
echo "raw output: $out.txt"
