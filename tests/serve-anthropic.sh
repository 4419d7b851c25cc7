# Checks `hotset serve`'s /v1/messages with the official Anthropic Python
# client (tests/serve-anthropic.py: thinking and text blocks whole and
# streamed, count_tokens, stop_sequences, tools and tool results, x-api-key,
# errors, forced calls) on a qwen35 model, and a forced call streamed as it is
# written on a gpt-oss model, from a virtual environment with `anthropic`
# installed from PyPI; skips (77) where it cannot be installed.
. "${top_srcdir:-.}/tests/lib.sh"
. "${top_srcdir:-.}/tests/serve-lib.sh"
py_with anthropic
gen_qwen35 "$TMP/q.gguf"
start_server an --model "$TMP/q.gguf" --device cpu --ctx 4096 --api-key k3y -q || fail "no server"
wait_ready || fail "not ready: $(cat "$TMP/an.err")"
url_an=$URL
pid_an=$SRV_PID
gen_model "$TMP/m.gguf"
trap 'kill -9 $SRV_PID $pid_an 2>/dev/null; rm -rf "$TMP"' EXIT
start_server ho --model "$TMP/m.gguf" --device cpu -q || fail "no gpt-oss server"
wait_ready || fail "gpt-oss not ready: $(cat "$TMP/ho.err")"
"$PY" "$top_srcdir/tests/serve-anthropic.py" "$url_an" k3y "$URL" || fail "the Anthropic client found problems (above)"
stop_server "gpt-oss server"
SRV_PID=$pid_an
stop_server "anthropic server"
finish
