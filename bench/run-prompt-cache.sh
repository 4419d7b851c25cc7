#!/bin/sh
# What `hotset serve`'s prompt cache saves on a chat's next turn: the e2e
# bench model (gpt-oss-120b-shaped, 2 layers x 32 experts, vocab 1024, made
# by `hotset bench --e2e`) on the CPU, one sequence; a first turn of PROMPT
# tokens and GEN generated, then the next turn (prompt, answer and TAIL new
# tokens) with the cache off and on.  Raw output in
# bench/results/prompt-cache-*.txt.  Takes the bench lock.
# usage: bench/run-prompt-cache.sh BUILD_DIR [ROUNDS [PROMPT [GEN [TAIL]]]]
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: bench/run-prompt-cache.sh BUILD_DIR [ROUNDS [PROMPT [GEN [TAIL]]]]}" && pwd)
rounds=${2:-5} plen=${3:-1500} gen=${4:-64} tail=${5:-32}
. "$src/bench/results.sh"
hotset="$build/hotset"
dir=${XDG_CACHE_HOME:-$HOME/.cache}/hotset
model="$dir/e2e-gpt-oss-120b-l2-e32-v1024.gguf"
[ -f "$model" ] || "$hotset" bench --e2e --devices cpu --pp 1 --tg 1 --reps 1 -q >/dev/null ||
	{ echo "cannot make the bench model"; exit 1; }
exec 9>/tmp/hs-bench.lock
flock 9
results_open prompt-cache "hotset serve: a chat's next turn with the prompt cache off and on (measurements)" \
	"bench/run-prompt-cache.sh $* (model $model, cpu, --parallel 1; $rounds rounds: first turn $plen tokens + $gen generated, next turn + $tail)"
log=$(mktemp)
"$hotset" serve --model "$model" --device cpu --port 0 --parallel 1 --ctx $((plen + gen + tail + 16)) -q >"$log" 2>&1 &
pid=$!
port=
for _ in $(seq 1 600); do
	port=$(sed -n 's/^hotset serve: listening on http:\/\/[^ ]*:\([0-9][0-9]*\) .*/\1/p' "$log")
	[ -n "$port" ] && curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health" | grep -q 200 && break
	sleep 0.1
done
python3 "$src/bench/prompt-cache-bench.py" "http://127.0.0.1:$port" "$rounds" "$plen" "$gen" "$tail" | tee -a "$out.txt"
kill -TERM $pid
wait $pid
rm -f "$log"
echo "raw output: $out.txt"
