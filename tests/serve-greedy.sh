# Checks that greedy answers through `hotset serve` are the tokens `hotset run`
# generates for the same prompt, one request at a time and with four in
# flight at once (decoded in one batch, prompts prefilled together).  The
# bound: batching changes the order of float sums only where weights are
# F16/F32 (a few ulps, tests/test-logits.c); Q8_0 dense weights and MXFP4
# experts give bit-identical logits, so their greedy tokens must match
# exactly.  Also: chat answers in flight equal the same chats alone.
. "${top_srcdir:-.}/tests/lib.sh"
. "${top_srcdir:-.}/tests/serve-lib.sh"

O="$HS_DATA/oracle"
gen_model "$TMP/g.gguf"
gen_model "$TMP/q.gguf" qwen3moe
N=$((24 / SLOW + 4))
# prompts of several lengths (past every sliding window), ids below every vocabulary
P1="1 2 3"
P2=$(seq 40 60 | tr '\n' ' ')
P3=$(seq 7 3 250 | head -70 | tr '\n' ' ')
P4=$(seq 5 5 245 | tr '\n' ' ')

# ids "1 2 3" -> 1,2,3
csv() { echo $1 | tr ' ' ','; }
# the "tokens" array of a completion answer, space separated
tokens_of() { sed -n 's/.*"tokens":\[\([0-9,]*\)\].*/\1/p' "$1" | tr ',' ' '; }
body() { echo "{\"prompt\":[$(csv "$1")],\"max_tokens\":$N,\"temperature\":0,\"ignore_eos\":true,\"return_tokens\":true}"; }

check_model() { # check_model NAME FILE DEVICE EXACT-IN-FLIGHT
	name=$1 file=$2 dev=$3 exact=$4
	for i in 1 2 3 4; do
		eval "p=\$P$i"
		"$HOTSET" run -q --model "$file" --tokens "$p" -n $N --device "$dev" >"$TMP/run$i" 2>"$TMP/err" ||
			{ fail "$name: run $i: $(cat "$TMP/err")"; return; }
	done
	start_server "$name" --model "$file" --device "$dev" --parallel 4 || { fail "$name: no server"; return; }
	wait_ready || { fail "$name: not ready: $(cat "$TMP/$name.err")"; return; }
	for i in 1 2 3 4; do # alone
		eval "p=\$P$i"
		req POST /v1/completions "$(body "$p")" && expect_status "$name alone $i" 200 &&
			[ "$(tokens_of "$TMP/out")" = "$(cat "$TMP/run$i")" ] ||
			fail "$name: prompt $i alone: server $(tokens_of "$TMP/out") vs run $(cat "$TMP/run$i")"
	done
	for round in 1 2; do # in flight together
		pids=
		for i in 1 2 3 4; do
			eval "p=\$P$i"
			curl -s --max-time $((60 * SLOW)) -o "$TMP/fl$i" "$URL/v1/completions" -d "$(body "$p")" &
			pids="$pids $!"
		done
		wait $pids
		for i in 1 2 3 4; do
			got=$(tokens_of "$TMP/fl$i")
			if [ "$got" != "$(cat "$TMP/run$i")" ]; then
				if [ "$exact" = exact ]; then
					fail "$name: prompt $i in flight (round $round): server $got vs run $(cat "$TMP/run$i")"
				else
					echo "note: $name (F16 weights): prompt $i in flight differs from run after float reassociation"
				fi
			fi
		done
	done
	stop_server "$name"
}

check_model gen-gptoss "$TMP/g.gguf" cpu exact
check_model gen-qwen3 "$TMP/q.gguf" cpu exact
check_model oracle-gptoss-q8 "$O/gptoss-l4-h192-swa32-q8.gguf" cpu exact
check_model oracle-qwen3-q8 "$O/qwen3moe-l3-h256-e16k4-q8.gguf" cpu exact
check_model oracle-gptoss-f16 "$O/gptoss-l2-h256-swa128-f16.gguf" cpu tolerant
check_model gen-gptoss-sim "$TMP/g.gguf" sim exact

# chat: four conversations in flight give what each gives alone
start_server chat --model "$TMP/g.gguf" --device cpu --parallel 4 || fail "chat server"
wait_ready || fail "chat server not ready"
chat() { echo "{\"messages\":[{\"role\":\"user\",\"content\":\"question $1\"}],\"max_tokens\":$N,\"temperature\":0,\"return_tokens\":true}"; }
for i in 1 2 3 4; do
	req POST /v1/chat/completions "$(chat $i)" && expect_status "chat alone $i" 200
	tokens_of "$TMP/out" >"$TMP/chat$i"
done
pids=
for i in 1 2 3 4; do
	curl -s --max-time $((60 * SLOW)) -o "$TMP/cf$i" "$URL/v1/chat/completions" -d "$(chat $i)" &
	pids="$pids $!"
done
wait $pids
for i in 1 2 3 4; do
	[ "$(tokens_of "$TMP/cf$i")" = "$(cat "$TMP/chat$i")" ] ||
		fail "chat $i in flight: $(tokens_of "$TMP/cf$i") vs alone $(cat "$TMP/chat$i")"
done
stop_server chat
finish
