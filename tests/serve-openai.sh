# Checks `hotset serve` with the official OpenAI Python client (streaming
# and not, chat and completions, logprobs on gpt-oss and qwen35, errors),
# from a virtual environment with `openai` installed from PyPI; skips (77)
# where it cannot be installed.
. "${top_srcdir:-.}/tests/lib.sh"
. "${top_srcdir:-.}/tests/serve-lib.sh"
py_with openai
gen_model "$TMP/m.gguf"
start_server oa --model "$TMP/m.gguf" --device cpu --parallel 3 --api-key k3y -q || fail "no server"
wait_ready || fail "not ready: $(cat "$TMP/oa.err")"
gen_qwen35 "$TMP/q.gguf"
url_oa=$URL
pid_oa=$SRV_PID
trap 'kill -9 $SRV_PID $pid_oa 2>/dev/null; rm -rf "$TMP"' EXIT
start_server q35 --model "$TMP/q.gguf" --device cpu --ctx 4096 -q || fail "no qwen35 server"
wait_ready || fail "qwen35 not ready: $(cat "$TMP/q35.err")"
"$PY" "$top_srcdir/tests/serve-openai.py" "$url_oa" k3y "$URL" || fail "the OpenAI client found problems (above)"
stop_server "qwen35 server"
SRV_PID=$pid_oa
stop_server "openai server"
finish
