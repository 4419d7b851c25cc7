#!/usr/bin/env bash
# A soak of `hotset serve`, built with ASan+UBSan (./configure
# --enable-sanitizers) or not: bench/soak-serve.py's mixed traffic
# (completions, streams, tool calls without arguments, hang-ups, bad
# requests) for SECONDS, the server's heap (/metrics hotset_heap_bytes: what
# its allocations hold, allocated and not freed) and resident memory sampled
# every 5 s.  Passes when the heap's peak in the last third stays within
# 1 MiB of the middle third's (no growth past warm-up), in a release build
# the resident memory's within 2 MiB too, ASan reports nothing and the
# server stops with 0.  Under ASan resident memory is printed, not judged:
# it also holds the tool's own records (a stack trace for every new call
# path that allocates, kept for the process's life), which keep growing
# while the traffic finds new paths; ASAN_EXTRA="malloc_context_size=0"
# (appended to ASAN_OPTIONS) turns those records off to show it.
# Raw output: bench/results/soak-DATE-COMMIT.txt.
#
# usage: bench/run-soak.sh BUILD-DIR [SECONDS (default 180)] [CLIENTS (default 6)]
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:?usage: bench/run-soak.sh BUILD-DIR [SECONDS] [CLIENTS]}
secs=${2:-180}
clients=${3:-6}
. "$src/bench/results.sh"
hotset=$build/hotset
[ -x "$hotset" ] || { echo "no $hotset"; exit 2; }
tmp=$(mktemp -d)
trap 'kill -9 $pid 2>/dev/null; rm -rf "$tmp"' EXIT
san="release build"
grep -q 'sanitizers  : yes' "$build/config.log" 2>/dev/null || grep -q -- '--enable-sanitizers' "$build/config.log" 2>/dev/null &&
	san="ASan+UBSan build"
results_open soak "hotset serve ($san $build${ASAN_EXTRA:+, ASAN_EXTRA=$ASAN_EXTRA}): $secs s of mixed traffic from $clients clients" \
	"bench/run-soak.sh $build $secs $clients"
"$hotset" gen -q --arch gpt-oss --layers 2 --experts 8 --used 2 --embd 128 --ff 128 --heads 4 --kv-heads 2 \
	--head-dim 32 --window 16 --vocab 300 -o "$tmp/m.gguf" || exit 2
# as make check runs them (full unwinding lets tests/lsan.supp see the hwloc
# plugin's frame), with a small quarantine: freed memory ASan holds back to
# catch use after free would otherwise fill 256 MiB first and look like growth
export ASAN_OPTIONS="protect_shadow_gap=0:fast_unwind_on_malloc=0:detect_leaks=1:quarantine_size_mb=8${ASAN_EXTRA:+:$ASAN_EXTRA}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export LSAN_OPTIONS="suppressions=$src/tests/lsan.supp:print_suppressions=0"
"$hotset" serve --model "$tmp/m.gguf" --device cpu --threads 1 --parallel 4 --ctx 4096 --max-body 65536 \
	--port 0 >"$tmp/out" 2>"$tmp/err" &
pid=$!
for _ in $(seq 300); do
	port=$(sed -n 's/^hotset serve: listening on http:\/\/[^ ]*:\([0-9][0-9]*\) .*/\1/p' "$tmp/out")
	[ -n "$port" ] && break
	sleep 0.2
done
[ -n "$port" ] || { cat "$tmp/err"; exit 2; }
until curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health" | grep -q 200; do sleep 0.5; done
( while kill -0 $pid 2>/dev/null; do
	heap=$(curl -s --max-time 4 "http://127.0.0.1:$port/metrics" | awk '$1 == "hotset_heap_bytes" {print $2 / 1024}')
	awk -v t="$(date +%s)" -v h="${heap:-0}" '/VmRSS/ {print t, $2, h}' /proc/$pid/status
	sleep 5
  done ) >"$tmp/rss" &
sampler=$!
python3 "$src/bench/soak-serve.py" "http://127.0.0.1:$port" "$clients" "$secs" >"$tmp/soak" 2>&1
soak_rc=$?
kill -TERM $pid
wait $pid
srv_rc=$?
kill $sampler 2>/dev/null
{
	echo
	cat "$tmp/soak"
	echo "server exit status after SIGTERM: $srv_rc"
	# a sanitizer's report, its first lines (the stacks say where)
	grep -m1 -A40 -E 'ERROR: (Address|Leak)Sanitizer|runtime error' "$tmp/err"
	echo
	echo "seconds  RSS (MiB)  heap (MiB)"
	t0=$(head -1 "$tmp/rss" | cut -d' ' -f1)
	awk -v t0="$t0" '{printf "%7d  %9.1f  %10.2f\n", $1 - t0, $2 / 1024, $3 / 1024}' "$tmp/rss"
	# the middle third's peaks against the last third's
	awk -v n="$(wc -l <"$tmp/rss")" -v judge_rss="$([ "$san" = "release build" ] && echo 1 || echo 0)" '
		NR > n / 3 && NR <= 2 * n / 3 { if ($2 > mid) mid = $2; if ($3 > hmid) hmid = $3 }
		NR > 2 * n / 3 { if ($2 > last) last = $2; if ($3 > hlast) hlast = $3 }
		END { printf "\npeak heap, middle third %.2f MiB, last third %.2f MiB: %+.2f MiB (limit +1)\n",
		      hmid / 1024, hlast / 1024, (hlast - hmid) / 1024
		      printf "peak RSS, middle third %.1f MiB, last third %.1f MiB: %+.1f MiB (%s)\n", mid / 1024,
		      last / 1024, (last - mid) / 1024, judge_rss ? "limit +2" : "not judged under ASan"
		      exit !(hmid > 0 && hlast - hmid <= 1024 && (!judge_rss || last - mid <= 2048)) }' "$tmp/rss"
	grow_rc=$?
	asan=$(grep -cE 'ERROR: (Address|Leak)Sanitizer|runtime error' "$tmp/err")
	verdict=pass
	[ $soak_rc -eq 0 ] && [ $srv_rc -eq 0 ] && [ $grow_rc -eq 0 ] && [ "$asan" -eq 0 ] || verdict=FAIL
	echo "verdict: $verdict (traffic problems: rc $soak_rc, exit $srv_rc, growth check $grow_rc, sanitizer reports $asan)"
} | tee -a "$out.txt"
grep -q '^verdict: pass' "$out.txt"
