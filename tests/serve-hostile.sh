#!/bin/sh
# Hostile clients against `hotset serve` (tests/serve-hostile.py, raw
# sockets and http.client), one check per finding of the adversarial pass:
# tool calls without arguments leak nothing; tool results by id and harmony
# calls cost work linear in the request; header and body deadlines that a
# trickle does not move, caps per client address and in total answered 503,
# the memory bodies hold bounded (503 busy_reading); `--api-key ""` refuses
# to start; error messages are JSON cut on UTF-8 boundaries; the HTTP head
# checked (two or bad Content-Lengths 400, unknown Transfer-Encoding 501,
# garbage request lines 400, all at once with one status line), 413 while
# a chunked body is still sent, GETs kept alive and pipelined, /v1/models%00
# 404; every documented type check (400 invalid_type), /v1/messages' and
# /v1/responses' too; logprobs' types and limits, response_format refused
# by name; a 503 while stopping has Retry-After.
. "${top_srcdir:-.}/tests/lib.sh"
. "${top_srcdir:-.}/tests/serve-lib.sh"
command -v python3 >/dev/null || { echo "SKIP: python3 is not installed"; exit 77; }
PY="$top_srcdir/tests/serve-hostile.py"

gen_model "$TMP/m.gguf"
M="$TMP/m.gguf"

# ---- an empty key is refused (an unset variable would serve everyone)
expect_fail "empty --api-key" "$HOTSET" serve --model "$M" --port 0 --api-key "" &&
	expect_grep "empty --api-key message" '^hotset serve: --api-key is empty' "$TMP/err"
expect_fail "empty HOTSET_API_KEY" env HOTSET_API_KEY= "$HOTSET" serve --model "$M" --port 0 &&
	expect_grep "empty HOTSET_API_KEY message" 'HOTSET_API_KEY is empty' "$TMP/err"
expect_fail "--max-conns 0" "$HOTSET" serve --model "$M" --port 0 --max-conns 0
expect_fail "--header-timeout 0" "$HOTSET" serve --model "$M" --port 0 --header-timeout 0

run_py() { # DESC CHECK...
	desc=$1
	shift
	SLOW=$SLOW SRV_PID=$SRV_PID python3 "$PY" "$port" "$@" >"$TMP/py.out" 2>&1 || fail "$desc: $(cat "$TMP/py.out")"
	grep -v '^FAIL' "$TMP/py.out" | head -5
}

start_server h1 --model "$M" --device cpu --ctx 512 --max-body 4096 || fail "server h1 did not start"
wait_ready || fail "h1 not ready: $(cat "$TMP/h1.err")"
run_py "HTTP, UTF-8, types" http utf8 types
run_py "body memory" body_memory
stop_server "h1"

# a body limit that lets the long requests in; their answers: 400 (over the context)
start_server h2 --model "$M" --device cpu --ctx 512 --max-body $((32 << 20)) || fail "server h2 did not start"
wait_ready || fail "h2 not ready"
run_py "linear work" linear
run_py "leak" leak
stop_server "h2"

start_server h3 --model "$M" --device cpu --ctx 512 --header-timeout 2 --body-timeout 2 || fail "server h3 did not start"
wait_ready || fail "h3 not ready"
run_py "deadlines" deadlines
stop_server "h3"

start_server h5 --model "$M" --device cpu --ctx 512 --max-conns 5 --max-conns-per-client 3 || fail "server h5 did not start"
wait_ready || fail "h5 not ready"
run_py "caps" caps
stop_server "h5"

start_server h4 --model "$M" --device cpu --ctx 8192 --grace $((20 * SLOW)) || fail "server h4 did not start"
wait_ready || fail "h4 not ready"
run_py "stopping" stopping
stop_server "h4 stopping"
finish
