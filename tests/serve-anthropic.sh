# Checks `hotset serve`'s /v1/messages with the official Anthropic Python
# client (tests/serve-anthropic.py: thinking and text blocks whole and
# streamed, count_tokens, stop_sequences, tools and tool results, x-api-key,
# errors) on a qwen35 model, from a virtual environment with `anthropic`
# installed from PyPI; skips (77) where it cannot be installed.
. "${top_srcdir:-.}/tests/lib.sh"
. "${top_srcdir:-.}/tests/serve-lib.sh"
py_with anthropic
gen_qwen35 "$TMP/q.gguf"
start_server an --model "$TMP/q.gguf" --device cpu --ctx 4096 --api-key k3y -q || fail "no server"
wait_ready || fail "not ready: $(cat "$TMP/an.err")"
"$PY" "$top_srcdir/tests/serve-anthropic.py" "$URL" k3y || fail "the Anthropic client found problems (above)"
stop_server "anthropic server"
finish
