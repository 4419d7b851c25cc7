#!/bin/sh
# Builds the fuzz targets with clang's libFuzzer (plus ASan and UBSan) and
# runs each from its seed corpus for half of SECONDS (default 60): the GGUF
# parser (with the tokenizer read from the parsed file) and the tokenizer
# (encode and decode any bytes, ids through the detokenizer and the chat
# reply parsers); then the server's request path (the gate's head check,
# request.c on raw bodies, error JSON) for half of SECONDS, at most 30 s.
# usage: tests/fuzz/run.sh BUILD_DIR [SECONDS]
# Exits 0 when no crash was found, 1 on a crash (the input is kept in
# BUILD_DIR/fuzz-crashes/), 77 when clang with libFuzzer is missing.
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:?usage: run.sh BUILD_DIR [SECONDS]}" && pwd)
secs=${2:-60}
each=$((secs / 2 > 0 ? secs / 2 : 1))
CLANG=${CLANG:-clang}
command -v "$CLANG" >/dev/null 2>&1 || { echo "SKIP: no clang (Debian package clang)"; exit 77; }
out="$build/fuzz"
mkdir -p "$out" "$build/fuzz-crashes"
lib="$src/model/gguf.c $src/base/error.c $src/cpu_kernels/formats.c $src/cpu_kernels/quants.c"
for f in unicode unicode-tables pretok tokenizer bpe detok chat chat-xml chat-tools reply grammar json-schema; do lib="$lib $src/text/$f.c"; done
# the server's request path: request.c and api.c over the library's text parts
http_src="$src/server/head.c $src/server/request.c $src/server/constrain.c $src/server/messages.c $src/server/responses.c $src/server/store.c $src/server/api.c"
for target in gguf tokenizer http; do
	extra=
	[ "$target" = http ] && extra="$http_src -lpthread"
	# shellcheck disable=SC2086 # $lib and $extra are lists of files
	if ! "$CLANG" -std=c11 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
		-I"$build" -I"$src" -I"$src/include" \
		"$src/tests/fuzz/fuzz-$target.c" $extra $lib -ljansson -lm -o "$out/fuzz-$target" 2>"$out/build-$target.log"; then
		if grep -q 'libclang_rt.fuzzer\|fuzzer.*not found\|cannot find.*fuzzer' "$out/build-$target.log"; then
			echo "SKIP: clang has no libFuzzer runtime"; cat "$out/build-$target.log"; exit 77
		fi
		cat "$out/build-$target.log"; exit 1
	fi
done
run() { # TARGET SEEDS MAX_LEN WHAT [SECONDS]
	t=${5:-$each}
	rm -rf "$out/corpus-$1" && cp -r "$2" "$out/corpus-$1" && chmod -R u+w "$out/corpus-$1"
	echo "fuzzing $4 for $t s from $(ls "$2" | wc -l) seeds"
	HS_DATA="$src/tests/data" "$out/fuzz-$1" -max_total_time="$t" -rss_limit_mb=2048 -max_len="$3" \
		-print_final_stats=1 -artifact_prefix="$build/fuzz-crashes/" "$out/corpus-$1" >"$out/run-$1.log" 2>&1
	rc=$?
	tail -12 "$out/run-$1.log"
	if [ $rc -ne 0 ]; then echo "fuzz: crash found in $1, input in $build/fuzz-crashes/"; return 1; fi
	echo "fuzz: no crash in $1 in $t s"
}
status=0
run gguf "$src/tests/fuzz/corpus" 65536 "the GGUF parser and tokenizer loader" || status=1
run tokenizer "$src/tests/fuzz/corpus-tokenizer" 4096 "the tokenizer and chat formats" || status=1
run http "$src/tests/fuzz/corpus-http" 16384 "the server's request path" $((each < 30 ? each : 30)) || status=1
exit $status
