#!/bin/sh
# hotset's mul_mat_id next to llama.cpp's on the gpt-oss-120b expert shape
# (2880 x 2880 MXFP4, 4 of 128 experts per token, fresh experts each step),
# rounds of: bench-kernels --ops mmid (hotset's host-copy layout, the tier
# this machine runs), then bench/results/llama-mmid.c (ggml's CPU_REPACK
# buffer).  The ratio per round compares the two runs next to each other in
# time; the summary gives the median and the range over the rounds.  Each
# run takes /tmp/hs-bench.lock.  Raw output: bench/results/llama-compare-*.
# usage: bench/run-llama-compare.sh BUILD_DIR LLAMA_MMID [ROUNDS] [NS] [THREADS]
#   LLAMA_MMID: the harness built against libggml (see its header comment)
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: run-llama-compare.sh BUILD_DIR LLAMA_MMID [ROUNDS] [NS] [THREADS]}" && pwd)
llama=${2:?the llama-mmid harness}
rounds=${3:-3}
ns=${4:-1,8,32,128,512}
thr=${5:-1,2}
. "$src/bench/results.sh"
results_open llama-compare "hotset mul_mat_id beside llama.cpp's (measurements)" \
	"run-llama-compare.sh: $rounds rounds of bench-kernels --ops mmid and llama-mmid, n = $ns, threads $thr"
export OMP_PROC_BIND=${OMP_PROC_BIND:-true} OMP_PLACES=${OMP_PLACES:-cores}
{
	echo "OMP_PROC_BIND=$OMP_PROC_BIND OMP_PLACES=$OMP_PLACES; other work may have run beside these runs"
	echo
} >>"$out.txt"
r=1
while [ "$r" -le "$rounds" ]; do
	echo "== round $r hotset:" >>"$out.txt"
	flock /tmp/hs-bench.lock "$build/bench/bench-kernels" --ops mmid --shapes gpt-oss --no-masked --ns "$ns" \
		--threads "$thr" >>"$out.txt" 2>&1
	echo "== round $r llama.cpp:" >>"$out.txt"
	flock /tmp/hs-bench.lock "$llama" --ns "$ns" --threads "$thr" >>"$out.txt" 2>&1
	r=$((r + 1))
done
# per round and case: hotset GB/s / llama.cpp GB/s; then median and range
# (fields: shape shape type op n thr tier ms GB/s ...)
awk '
/^== round/ { round = $3; who = $4 }
$1 == "gpt-oss-120b" && $4 == "mmid" {
	key = $5 " " $6
	if (who == "hotset:") h[round, key] = $9; else l[round, key] = $9
	if (!(key in seen)) { seen[key] = 1; order[++nk] = key }
}
END {
	print "\nsummary: hotset GB/s / llama.cpp GB/s, per round next to each other in time"
	printf "%5s %4s  %-36s %7s %7s %7s\n", "n", "thr", "ratio per round", "median", "min", "max"
	for (i = 1; i <= nk; i++) {
		k = order[i]; m = 0; list = ""
		for (r = 1; (r, k) in h; r++)
			if ((r, k) in l && l[r, k] > 0) { v[++m] = h[r, k] / l[r, k]; list = list sprintf(" %.2f", v[m]) }
		for (a = 2; a <= m; a++) # insertion sort
			for (b = a; b > 1 && v[b - 1] > v[b]; b--) { t = v[b]; v[b] = v[b - 1]; v[b - 1] = t }
		med = m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
		split(k, kk, " ")
		printf "%5s %4s  %-36s %7.2f %7.2f %7.2f\n", kk[1], kk[2], list, med, v[1], v[m]
	}
}' "$out.txt" >>"$out.txt"
cat "$out.txt"
echo "raw output: $out.txt"
