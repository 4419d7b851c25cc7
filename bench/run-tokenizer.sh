#!/bin/sh
# Measures hotset's tokenizer beside OpenAI's tiktoken in the same run, on one
# core each, on a large mixed multilingual text (bench/make-corpus.py: this
# machine's gettext catalogs, 25 languages), and the o200k pattern run by
# PCRE2's JIT for the pre-tokenizer alone; checks that both tokenizers give
# the same ids (count and hash); keeps the raw output, with the machine and
# the commit, in bench/results/tokenizer-DATE-COMMIT.txt.
# usage: bench/run-tokenizer.sh BUILD_DIR [REPEATS]
# Needs: pip install tiktoken bpe-openai; libpcre2-dev for the PCRE2 line.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: run-tokenizer.sh BUILD_DIR [REPEATS]}" && pwd)
repeats=${2:-5}
vocab=$src/tests/data/vocab/gptoss-o200k-harmony-vocab.gguf
corpus=$build/bench/tokenizer-corpus.txt
. "$src/bench/results.sh"
results_open tokenizer "hotset tokenizer beside tiktoken, one core each (measurements)" \
	"bench/run-tokenizer.sh BUILD_DIR $repeats"
python3 "$src/bench/make-corpus.py" "$corpus" >>"$out.txt"
pcre=
if pkg-config --exists libpcre2-8 2>/dev/null; then
	pcre=$build/bench/pcre2-split
	cc -O2 -std=c11 "$src/bench/pcre2-split.c" $(pkg-config --cflags --libs libpcre2-8) -o "$pcre"
fi
{
	echo "(other work may have run on this machine beside the benchmark; the lock /tmp/hs-bench.lock keeps"
	echo " hotset's own benchmarks apart; compare the ratios inside this run)"
	echo
} >>"$out.txt"
# one lock for the whole comparison, each tokenizer on one thread
flock /tmp/hs-bench.lock sh -c '
	taskset -c 0 python3 "$1/bench/tiktoken-bench.py" "$2" "$3"
	taskset -c 0 "$4/bench/bench-tokenizer" "$5" "$2" "$3"
	[ -z "$6" ] || taskset -c 0 "$6" "$2" "$3"
' sh "$src" "$corpus" "$repeats" "$build" "$vocab" "$pcre" >>"$out.txt" 2>&1
tk=$(sed -n 's/^tiktoken .*best *\([0-9.]*\) MB.*/\1/p' "$out.txt")
hs=$(sed -n 's/^encode (hs_tokenize) *best *\([0-9.]*\) MB.*/\1/p' "$out.txt")
tk_ids=$(sed -n 's/^ids: \([0-9]*\), fnv64 \([0-9a-f]*\)$/\1 \2/p' "$out.txt")
hs_ids=$(sed -n 's/^ids: \([0-9]*\) (.*fnv64 \([0-9a-f]*\)$/\1 \2/p' "$out.txt")
{
	echo
	if [ -n "$tk_ids" ] && [ "$tk_ids" = "$hs_ids" ]; then
		echo "same ids: hotset and tiktoken both give $tk_ids (count, fnv64)"
	else
		echo "DIFFERENT ids: tiktoken '$tk_ids', hotset '$hs_ids'"
	fi
	awk -v a="$hs" -v b="$tk" 'BEGIN { if (a > 0 && b > 0) printf "encode speed, hotset / tiktoken (best of each): %.2fx\n", a / b }'
} >>"$out.txt"
cat "$out.txt"
echo "raw output: $out.txt"
