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
. "$src/bench/serve-lib.sh"
hotset="$build/hotset"
bench_model
exec 9>/tmp/hs-bench.lock
flock 9
results_open prompt-cache "hotset serve: a chat's next turn with the prompt cache off and on (measurements)" \
	"bench/run-prompt-cache.sh $* (model $model, cpu, --parallel 1; $rounds rounds: first turn $plen tokens + $gen generated, next turn + $tail)"
serve_start --model "$model" --device cpu --parallel 1 --ctx $((plen + gen + tail + 16))
python3 "$src/bench/prompt-cache-bench.py" "$url" "$rounds" "$plen" "$gen" "$tail" | tee -a "$out.txt"
serve_stop
echo "raw output: $out.txt"
