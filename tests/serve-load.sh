# Load test of `hotset serve`: 64 concurrent clients send several hundred
# requests (half streamed) to a server with 4 sequences and a queue of 8, so
# many are refused with 503 + Retry-After and retried.  Every request is
# answered once with the answer its prompt gets alone, no KV cell is held
# afterwards (/metrics), and the server's resident memory stays flat
# (after a warm-up round, a second and a third round add at most 8 MiB).
. "${top_srcdir:-.}/tests/lib.sh"
. "${top_srcdir:-.}/tests/serve-lib.sh"
command -v python3 >/dev/null || { echo "SKIP: python3 is not installed"; exit 77; }
gen_model "$TMP/m.gguf"
clients=64 total=448
[ $SLOW -gt 1 ] && clients=16 total=96
# (every client from 127.0.0.1: the per-address cap is raised, this test is about the queue)
start_server load --model "$TMP/m.gguf" --device cpu --parallel 4 --max-queue 8 --max-conns-per-client 256 \
	--max-conns 256 -q || fail "no server"
wait_ready || fail "not ready: $(cat "$TMP/load.err")"
rss() { awk '/^VmRSS:/ {print $2}' "/proc/$SRV_PID/status"; }
LOAD="$top_srcdir/tests/serve-load.py"
python3 "$LOAD" "$URL" $clients $clients $((120 * SLOW)) || fail "warm-up round"
r0=$(rss)
python3 "$LOAD" "$URL" $clients $total $((120 * SLOW)) || fail "load round"
r1=$(rss)
python3 "$LOAD" "$URL" $clients $total $((120 * SLOW)) || fail "second load round"
r2=$(rss)
echo "server RSS: $r0 kB after the warm-up, $r1 kB and $r2 kB after each round of $total requests"
# ASan's quarantine holds freed memory on purpose: memory is checked by LSan there
if [ "${HS_SANITIZER_BUILD:-}" != yes ]; then
	[ $((r2 - r0)) -le 8192 ] || fail "server memory grew by $((r2 - r0)) kB over two rounds"
fi
stop_server "load server"
finish
