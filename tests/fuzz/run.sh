#!/bin/sh
# Builds the GGUF parser fuzz target with clang's libFuzzer (plus ASan and
# UBSan) and runs it for SECONDS (default 60) from the seed corpus.
# usage: tests/fuzz/run.sh BUILD_DIR [SECONDS]
# Exits 0 when no crash was found, 1 on a crash (the input is kept in
# BUILD_DIR/fuzz-crashes/), 77 when clang with libFuzzer is missing.
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:?usage: run.sh BUILD_DIR [SECONDS]}" && pwd)
secs=${2:-60}
CLANG=${CLANG:-clang}
command -v "$CLANG" >/dev/null 2>&1 || { echo "SKIP: no clang (Debian package clang)"; exit 77; }
out="$build/fuzz"
mkdir -p "$out" "$build/fuzz-crashes"
if ! "$CLANG" -std=c11 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	-I"$build" -I"$src" -I"$src/include" \
	"$src/tests/fuzz/fuzz-gguf.c" "$src/model/gguf.c" "$src/base/error.c" "$src/cpu_kernels/formats.c" \
	-lm -o "$out/fuzz-gguf" 2>"$out/build.log"; then
	if grep -q 'libclang_rt.fuzzer\|fuzzer.*not found\|cannot find.*fuzzer' "$out/build.log"; then
		echo "SKIP: clang has no libFuzzer runtime"; cat "$out/build.log"; exit 77
	fi
	cat "$out/build.log"; exit 1
fi
rm -rf "$out/corpus" && cp -r "$src/tests/fuzz/corpus" "$out/corpus" && chmod -R u+w "$out/corpus"
echo "fuzzing the GGUF parser for $secs s from $(ls "$src/tests/fuzz/corpus" | wc -l) seeds"
"$out/fuzz-gguf" -max_total_time="$secs" -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
	-artifact_prefix="$build/fuzz-crashes/" "$out/corpus" >"$out/run.log" 2>&1
rc=$?
tail -12 "$out/run.log"
if [ $rc -ne 0 ]; then echo "fuzz: crash found, input in $build/fuzz-crashes/"; exit 1; fi
echo "fuzz: no crash in $secs s"
