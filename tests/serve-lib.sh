# Helpers for the `hotset serve` tests (sourced after tests/lib.sh): a tiny
# generated model, a server on a free port of 127.0.0.1, curl with a time
# limit, and a stop that must end in exit 0.
command -v curl >/dev/null || { echo "SKIP: curl is not installed"; exit 77; }
SRV_PID=
trap '[ -n "$SRV_PID" ] && kill -9 "$SRV_PID" 2>/dev/null; rm -rf "$TMP"' EXIT
# sanitizer builds run several times slower: tests scale their work down
SLOW=1
[ "${HS_SANITIZER_BUILD:-}" = yes ] && SLOW=4

# gen_model FILE [ARCH]: the small whole model the server tests use
# ($HOTSET_GEN, when set, makes it: a ThreadSanitizer run of the server
# takes an uninstrumented build there, as gen's OpenMP is not instrumented)
gen_model() {
	"${HOTSET_GEN:-$HOTSET}" gen -q --arch "${2:-gpt-oss}" --layers 2 --experts 8 --used 2 --embd 128 --ff 128 --heads 4 \
		--kv-heads 2 --head-dim 32 --window 16 --vocab 300 -o "$1" || { echo "gen failed"; exit 1; }
}

# gen_qwen35 FILE: a small qwen35moe model (DeltaNet and gated attention,
# a shared expert) whose random replies open with reasoning
gen_qwen35() {
	"${HOTSET_GEN:-$HOTSET}" gen -q --arch qwen35moe --layers 2 --full-attn-every 2 --experts 8 --used 2 --embd 256 --ff 256 \
		--shared-experts 1 --heads 4 --kv-heads 2 --head-dim 64 --vocab 300 -o "$1" || { echo "gen failed"; exit 1; }
}

# start_server NAME ARGS...: `hotset serve --port 0 ARGS` in the background
# (stdout in $TMP/NAME.out, stderr in $TMP/NAME.err); sets SRV_PID and URL
# once the port is printed.  Returns 1 if the server exits first.  One CPU
# thread unless ARGS say otherwise: on a machine busy with other tests two
# OpenMP threads wait out each other's time slices at every barrier (a
# 507-token answer once took over 60 s), and these tests check answers, not
# speed.
start_server() {
	name=$1
	shift
	: >"$TMP/$name.out"
	thr="--threads 1"
	case " $* " in *" --threads "*) thr= ;; esac
	# shellcheck disable=SC2086
	"$HOTSET" serve --port 0 $thr "$@" >>"$TMP/$name.out" 2>"$TMP/$name.err" &
	SRV_PID=$!
	port=
	for _ in $(seq 1 $((300 * SLOW))); do
		port=$(sed -n 's/^hotset serve: listening on http:\/\/[^ ]*:\([0-9][0-9]*\) .*/\1/p' "$TMP/$name.out")
		[ -n "$port" ] && break
		kill -0 "$SRV_PID" 2>/dev/null || { SRV_PID=; return 1; }
		sleep 0.1
	done
	[ -n "$port" ] || { fail "$name: no port printed: $(cat "$TMP/$name.err")"; return 1; }
	URL=http://127.0.0.1:$port
}

# wait_ready: /health answers 200 (at most 60 s)
wait_ready() {
	for _ in $(seq 1 $((600 * SLOW))); do
		[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$URL/health")" = 200 ] && return 0
		kill -0 "$SRV_PID" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

# stop_server DESC: SIGTERM, and the server must exit 0 within 60 s
stop_server() {
	kill -TERM "$SRV_PID" 2>/dev/null
	for _ in $(seq 1 $((600 * SLOW))); do
		kill -0 "$SRV_PID" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$SRV_PID" 2>/dev/null; then
		fail "$1: still running $((60 * SLOW)) s after SIGTERM"
		kill -9 "$SRV_PID"
	fi
	wait "$SRV_PID"
	rc=$?
	[ $rc -eq 0 ] || fail "$1: exit status $rc after SIGTERM"
	SRV_PID=
}

# req METHOD PATH [BODY [CURL-ARGS...]]: body in $TMP/out, headers in
# $TMP/hdr, status in $code
req() {
	m=$1 p=$2
	shift 2
	if [ $# -gt 0 ]; then
		b=$1
		shift
		code=$(curl -s -X "$m" --max-time $((60 * SLOW)) -D "$TMP/hdr" -o "$TMP/out" -w '%{http_code}' \
			-H 'Content-Type: application/json' --data-binary "$b" "$@" "$URL$p")
	else
		code=$(curl -s -X "$m" --max-time $((60 * SLOW)) -D "$TMP/hdr" -o "$TMP/out" -w '%{http_code}' "$URL$p")
	fi
	# a curl that timed out or failed leaves code 000 for expect_status to
	# report: `req ... && expect_status ...` must not skip the check
	return 0
}

# expect_status DESC CODE: the last req answered CODE
expect_status() {
	[ "$code" = "$2" ] || { fail "$1: status $code, expected $2: $(head -c 400 "$TMP/out")"; return 1; }
}

# expect_error DESC CODE TYPE: an OpenAI error object with that status and type
expect_error() {
	expect_status "$1" "$2" || return 1
	expect_grep "$1 error object" "^\{\"error\":\{\"message\":\".+\",\"type\":\"$3\",\"param\":"
	grep -qi '^content-type: application/json' "$TMP/hdr" || fail "$1: not JSON: $(cat "$TMP/hdr")"
}

# metric NAME: its value in /metrics (labels included in NAME)
metric() {
	curl -s --max-time 10 "$URL/metrics" $SRV_AUTH | awk -v n="$1" '$1 == n {print $2}'
}
SRV_AUTH=

# py_with MODULE: sets PY to a python3 that imports MODULE: the system's, or
# one from a virtual environment (cached) with it installed from PyPI;
# skips (77) where it cannot be installed.
py_with() {
	command -v python3 >/dev/null || { echo "SKIP: python3 is not installed"; exit 77; }
	PY=python3
	python3 -c "import $1" 2>/dev/null && return 0
	venv="${XDG_CACHE_HOME:-$HOME/.cache}/hotset/venv-$1"
	if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import $1" 2>/dev/null; then
		{ python3 -m venv "$venv" && "$venv/bin/pip" install -q "$1"; } >"$TMP/pip.log" 2>&1 ||
			{ echo "SKIP: cannot make a venv with $1: $(tail -2 "$TMP/pip.log")"; exit 77; }
	fi
	PY="$venv/bin/python"
}
