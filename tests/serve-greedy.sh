# Checks that greedy answers through `hotset serve` are the tokens `hotset run`
# generates for the same prompt, one request at a time and with four in
# flight at once (decoded in one batch, prompts prefilled together).  The
# bound: a batch changes a row's arithmetic only where a kernel's float
# sums follow the batch's row tiles (F16/F32 weights, the F32 router): a
# few ulps (tests/test-logits.c), which the Q8_0 rounding of activations
# can lift to about 1e-3 of a logit row (its worst batched row: 2.1e-3).
# So the tokens must be equal, except that they may part where the two
# candidates are a near tie: within 1% of the row's largest |logit| in
# `hotset run`'s logits of the common prefix (each one is printed).  The
# same for the next turn of a prompt, which starts from the KV cells its
# earlier turn left (the prompt cache).  Also:
# chat turns and text prompts equal `hotset run --chat` and `--prompt`, and
# chat answers in flight equal the same chats alone.
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

# near_tie FILE DEV PROMPT WANT GOT: WANT (run) and GOT (server) part at their
# first difference only where the two tokens' logits there, computed by
# `hotset run` over the prompt and the common prefix, are within 1% of the
# row's largest |logit|.
near_tie() {
	file=$1 dev=$2 p=$3
	set -- $4 -- $5
	common= k=0
	want_all=$(echo "$@" | sed 's/ -- .*//') got_all=$(echo "$@" | sed 's/.* -- //')
	set -- $want_all
	for w; do
		g=$(echo $got_all | cut -d' ' -f$((k + 1)))
		[ "$w" = "$g" ] || break
		common="$common $w"
		k=$((k + 1))
	done
	command -v python3 >/dev/null || { echo "no python3 to look at the tie"; return 1; }
	"$HOTSET" run -q --model "$file" --device "$dev" --tokens "$p $common" -n 0 --logits "$TMP/tie.npy" || return 1
	python3 - "$TMP/tie.npy" "$w" "$g" "$k" <<'PY'
import ast, struct, sys
raw = open(sys.argv[1], "rb").read()
hl = struct.unpack("<H", raw[8:10])[0]
shape = ast.literal_eval(raw[10:10 + hl].decode())["shape"]
n = shape[1]
row = struct.unpack(f"<{n}f", raw[10 + hl + 4 * n * (shape[0] - 1):10 + hl + 4 * n * shape[0]])
w, g, k = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
gap, top = abs(row[w] - row[g]), max(abs(x) for x in row)
print(f"generated token {k}: run {w}, server {g}; their logits differ by {gap:.3g}, "
      f"{gap / top:.2%} of the row's largest |logit| {top:.3g}")
sys.exit(0 if gap <= 0.01 * top else 1)
PY
}

check_model() { # check_model NAME FILE DEVICE
	name=$1 file=$2 dev=$3
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
				eval "p=\$P$i"
				echo "note: $name, prompt $i in flight (round $round):"
				near_tie "$file" "$dev" "$p" "$(cat "$TMP/run$i")" "$got" ||
					fail "$name: prompt $i in flight (round $round): server $got vs run $(cat "$TMP/run$i"), not at a near tie"
			fi
		done
	done
	# the next turn: prompt 3 (70 tokens), the first k tokens of its answer
	# (k < N: the answer's last token was never fed back), then new tokens;
	# the server keeps the 70 + k tokens prompt 3's sequence shares with it
	# (its cells past them are freed) and prefills the rest, and answers
	# what `hotset run` gives for the whole prompt
	k=$((N - 1 < 8 ? N - 1 : 8))
	next="$P3 $(cut -d' ' -f1-$k "$TMP/run3") 1 2 3"
	"$HOTSET" run -q --model "$file" --tokens "$next" -n $N --device "$dev" >"$TMP/runnext" 2>"$TMP/err" ||
		fail "$name: run next: $(cat "$TMP/err")"
	req POST /v1/completions "$(body "$next")" && expect_status "$name next turn" 200 && {
		expect_grep "$name next turn cached" "\"cached_tokens\":$((70 + k))}"
		got=$(tokens_of "$TMP/out")
		if [ "$got" != "$(cat "$TMP/runnext")" ]; then
			echo "note: $name, the next turn:"
			near_tie "$file" "$dev" "$next" "$(cat "$TMP/runnext")" "$got" ||
				fail "$name: next turn: server $got vs run $(cat "$TMP/runnext"), not at a near tie"
		fi
	}
	stop_server "$name"
}

check_model gen-gptoss "$TMP/g.gguf" cpu
check_model gen-qwen3 "$TMP/q.gguf" cpu
check_model oracle-gptoss-q8 "$O/gptoss-l4-h192-swa32-q8.gguf" cpu
check_model oracle-qwen3-q8 "$O/qwen3moe-l3-h256-e16k4-q8.gguf" cpu
check_model oracle-gptoss-f16 "$O/gptoss-l2-h256-swa128-f16.gguf" cpu
check_model gen-gptoss-sim "$TMP/g.gguf" sim

# text: chat turns and raw prompts give `hotset run --chat` / `--prompt`'s tokens, and
# four conversations in flight give what each gives alone
run_tokens() { # the "tokens" array of `hotset run --json`, space separated
	"$HOTSET" run -q --json --model "$TMP/g.gguf" --device cpu -n $N "$@" |
		awk '/"tokens": \[/ {on = 1; next} on && /\]/ {exit} on {gsub(/[ ,]/, ""); printf "%s%s", sep, $0; sep = " "}'
}
start_server chat --model "$TMP/g.gguf" --device cpu --parallel 4 || fail "chat server"
wait_ready || fail "chat server not ready"
chat() { echo "{\"messages\":[{\"role\":\"user\",\"content\":\"question $1\"}],\"max_tokens\":$N,\"temperature\":0,\"return_tokens\":true}"; }
for i in 1 2 3 4; do
	req POST /v1/chat/completions "$(chat $i)" && expect_status "chat alone $i" 200
	tokens_of "$TMP/out" >"$TMP/chat$i"
	[ "$(cat "$TMP/chat$i")" = "$(run_tokens --chat "question $i")" ] ||
		fail "chat $i: server $(cat "$TMP/chat$i") vs run --chat $(run_tokens --chat "question $i")"
done
req POST /v1/completions "{\"prompt\":\"Once upon a time\",\"max_tokens\":$N,\"temperature\":0,\"ignore_eos\":true,\"return_tokens\":true}" &&
	expect_status "text prompt" 200 &&
	{ [ "$(tokens_of "$TMP/out")" = "$(run_tokens --prompt "Once upon a time" --ignore-eos)" ] ||
		fail "text prompt: server $(tokens_of "$TMP/out") vs run --prompt $(run_tokens --prompt "Once upon a time" --ignore-eos)"; }
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
