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
hotset="$build/hotset"
dir=${XDG_CACHE_HOME:-$HOME/.cache}/hotset
model="$dir/e2e-gpt-oss-120b-l2-e32-v1024.gguf"
# the bench model, made as `hotset bench --e2e` makes it (a 1-token run)
[ -f "$model" ] || "$hotset" bench --e2e --devices cpu --pp 1 --tg 1 --reps 1 -q >/dev/null ||
	{ echo "cannot make the bench model"; exit 1; }
exec 9>/tmp/hs-bench.lock
flock 9
results_open serve "hotset serve: aggregate generated tokens/s at 1, 2, 4, 8 parallel streams" \
	"bench/run-serve.sh $* (model $model; $rounds rounds of N streams, prompt $plen tokens, $gen generated each)"
echo "note: measured on a shared machine; other work may have run beside it. Compare ratios within this file." >>"$out.txt"
echo "load average at the start: $(cat /proc/loadavg)" >>"$out.txt"
for dev in cpu sim; do
	for n in 1 2 4 8; do
		log=$(mktemp)
		"$hotset" serve --model "$model" --device "$dev" --port 0 --parallel $n --ctx $((plen + gen + 8)) \
			--max-queue 0 -q >"$log" 2>&1 &
		pid=$!
		port=
		for _ in $(seq 1 600); do
			port=$(sed -n 's/^hotset serve: listening on http:\/\/[^ ]*:\([0-9][0-9]*\) .*/\1/p' "$log")
			[ -n "$port" ] && curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health" | grep -q 200 && break
			sleep 0.1
		done
		url=http://127.0.0.1:$port
		# warm-up: one round at this width (not counted)
		python3 "$src/bench/serve-bench.py" "$url" $n 1 $plen $gen >/dev/null
		{
			echo "== device $dev, streams $n"
			python3 "$src/bench/serve-bench.py" "$url" $n "$rounds" $plen $gen
		} | tee -a "$out.txt"
		kill -TERM $pid
		wait $pid
		rm -f "$log"
	done
done
echo "raw output: $out.txt"
