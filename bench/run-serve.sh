#!/bin/sh
# `hotset serve` under 1, 2, 4 and 8 parallel streams: aggregate generated
# tokens/s on the e2e bench model (gpt-oss-120b-shaped, 2 layers x 32
# experts, vocab 1024, made by `hotset bench --e2e`), on cpu and sim, with
# the raw output kept in bench/results/serve-*.txt.  Takes the bench lock.
# usage: bench/run-serve.sh BUILD_DIR [ROUNDS [PROMPT [GEN]]]
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: bench/run-serve.sh BUILD_DIR [ROUNDS [PROMPT [GEN]]]}" && pwd)
rounds=${2:-3} plen=${3:-32} gen=${4:-64}
. "$src/bench/results.sh"
. "$src/bench/serve-lib.sh"
hotset="$build/hotset"
bench_model
exec 9>/tmp/hs-bench.lock
flock 9
results_open serve "hotset serve: aggregate generated tokens/s at 1, 2, 4, 8 parallel streams" \
	"bench/run-serve.sh $* (model $model; $rounds rounds of N streams, prompt $plen tokens, $gen generated each)"
echo "note: measured on a shared machine; other work may have run beside it. Compare ratios within this file." >>"$out.txt"
echo "load average at the start: $(cat /proc/loadavg)" >>"$out.txt"
for dev in cpu sim; do
	for n in 1 2 4 8; do
		serve_start --model "$model" --device "$dev" --parallel $n --ctx $((plen + gen + 8)) --max-queue 0
		# warm-up: one round at this width (not counted)
		python3 "$src/bench/serve-bench.py" "$url" $n 1 $plen $gen >/dev/null
		{
			echo "== device $dev, streams $n"
			python3 "$src/bench/serve-bench.py" "$url" $n "$rounds" $plen $gen
		} | tee -a "$out.txt"
		serve_stop
	done
done
echo "raw output: $out.txt"
