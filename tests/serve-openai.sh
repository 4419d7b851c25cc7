# Checks `hotset serve` with the official OpenAI Python client (streaming
# and not, chat and completions, logprobs on gpt-oss and qwen35, errors), from a virtual environment with
# `openai` installed from PyPI; skips (77) where it cannot be installed.
. "${top_srcdir:-.}/tests/lib.sh"
. "${top_srcdir:-.}/tests/serve-lib.sh"
command -v python3 >/dev/null || { echo "SKIP: python3 is not installed"; exit 77; }
PY=python3
if ! python3 -c 'import openai' 2>/dev/null; then
	venv="${XDG_CACHE_HOME:-$HOME/.cache}/hotset/venv-openai"
	if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import openai' 2>/dev/null; then
		{ python3 -m venv "$venv" && "$venv/bin/pip" install -q openai; } >"$TMP/pip.log" 2>&1 ||
			{ echo "SKIP: cannot make a venv with openai: $(tail -2 "$TMP/pip.log")"; exit 77; }
	fi
	PY="$venv/bin/python"
fi
gen_model "$TMP/m.gguf"
start_server oa --model "$TMP/m.gguf" --device cpu --parallel 2 --api-key k3y -q || fail "no server"
wait_ready || fail "not ready: $(cat "$TMP/oa.err")"
"$HOTSET" gen -q --arch qwen35moe --layers 2 --full-attn-every 2 --experts 8 --used 2 --embd 256 --ff 256 \
	--shared-experts 1 --heads 4 --kv-heads 2 --head-dim 64 --vocab 300 -o "$TMP/q.gguf" || fail "gen qwen35"
url_oa=$URL
pid_oa=$SRV_PID
trap 'kill -9 $SRV_PID $pid_oa 2>/dev/null; rm -rf "$TMP"' EXIT
start_server q35 --model "$TMP/q.gguf" --device cpu --ctx 1024 -q || fail "no qwen35 server"
wait_ready || fail "qwen35 not ready: $(cat "$TMP/q35.err")"
"$PY" "$top_srcdir/tests/serve-openai.py" "$url_oa" k3y "$URL" || fail "the OpenAI client found problems (above)"
stop_server "qwen35 server"
SRV_PID=$pid_oa
stop_server "openai server"
finish
