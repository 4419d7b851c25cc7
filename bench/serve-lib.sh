# Sourced by bench/run-serve.sh and bench/run-prompt-cache.sh: the e2e bench
# model (gpt-oss-120b-shaped, 2 layers x 32 experts, vocab 1024, made as
# `hotset bench --e2e` makes it) and a `hotset serve` started on a free port.
# Needs $hotset.
bench_model() {
	dir=${XDG_CACHE_HOME:-$HOME/.cache}/hotset
	model="$dir/e2e-gpt-oss-120b-l2-e32-v1024.gguf"
	[ -f "$model" ] || "$hotset" bench --e2e --devices cpu --pp 1 --tg 1 --reps 1 -q >/dev/null ||
		{ echo "cannot make the bench model"; exit 1; }
}

# serve_start ARGS...: starts `hotset serve -q --port 0 ARGS`; sets $pid and
# $url once /health answers 200 (at most 60 s).
serve_start() {
	log=$(mktemp)
	"$hotset" serve --port 0 -q "$@" >"$log" 2>&1 &
	pid=$!
	port=
	for _ in $(seq 1 600); do
		port=$(sed -n 's/^hotset serve: listening on http:\/\/[^ ]*:\([0-9][0-9]*\) .*/\1/p' "$log")
		[ -n "$port" ] && curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health" | grep -q 200 && break
		sleep 0.1
	done
	url=http://127.0.0.1:$port
	rm -f "$log"
}

serve_stop() {
	kill -TERM $pid
	wait $pid
}
