#!/bin/sh
# Measures hotset's tokenizer beside OpenAI's tiktoken in the same run, on one
# core each, on a large mixed multilingual text (bench/make-corpus.py: this
# machine's gettext catalogs, 25 languages in 14 scripts), and the o200k pattern run by
# PCRE2's JIT for the pre-tokenizer alone; checks that both tokenizers give
# the same ids (count and hash); keeps the raw output, with the machine and
# the commit, in bench/results/tokenizer-DATE-COMMIT.txt.
# The two alternate, ROUNDS times (each run REPEATS encodes), so that a change
# in the machine's load falls on both.
# usage: bench/run-tokenizer.sh BUILD_DIR [REPEATS] [ROUNDS]
# Needs: pip install tiktoken bpe-openai; libpcre2-dev for the PCRE2 line.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: run-tokenizer.sh BUILD_DIR [REPEATS]}" && pwd)
repeats=${2:-5}
rounds=${3:-3}
vocab=$src/tests/data/vocab/gptoss-o200k-harmony-vocab.gguf
corpus=$build/bench/tokenizer-corpus.txt
. "$src/bench/results.sh"
results_open tokenizer "hotset tokenizer beside tiktoken, one core each (measurements)" \
	"bench/run-tokenizer.sh BUILD_DIR $repeats $rounds"
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
	for r in $(seq "$7"); do
		echo "--- round $r"
		taskset -c 0 python3 "$1/bench/tiktoken-bench.py" "$2" "$3"
		taskset -c 0 "$4/bench/bench-tokenizer" "$5" "$2" "$3"
		[ -z "$6" ] || taskset -c 0 "$6" "$2" "$3"
	done
' sh "$src" "$corpus" "$repeats" "$build" "$vocab" "$pcre" "$rounds" >>"$out.txt" 2>&1
best() { sed -n "s/^$1 *best *\([0-9.]*\) MB.*/\1/p" "$out.txt" | sort -g | tail -1; }
tk=$(best 'tiktoken .*encode_ordinary')
hs=$(best 'encode (hs_tokenize)')
tk_ids=$(sed -n 's/^ids: \([0-9]*\), fnv64 \([0-9a-f]*\)$/\1 \2/p' "$out.txt" | sort -u)
hs_ids=$(sed -n 's/^ids: \([0-9]*\) (.*fnv64 \([0-9a-f]*\)$/\1 \2/p' "$out.txt" | sort -u)
{
	echo
	if [ -n "$tk_ids" ] && [ "$tk_ids" = "$hs_ids" ]; then
		echo "same ids: hotset and tiktoken both give $tk_ids (count, fnv64)"
	else
		echo "DIFFERENT ids: tiktoken '$tk_ids', hotset '$hs_ids'"
	fi
	awk -v a="$hs" -v b="$tk" 'BEGIN { if (a > 0 && b > 0) printf "encode speed, best of all rounds: hotset %.2f MB/s, tiktoken %.2f MB/s, hotset / tiktoken %.2fx\n", a, b, a / b }'
	# each round's ratio, best against best within the round
	awk '/^--- round/ { r = $3 } /^tiktoken .*encode_ordinary/ { for (i = 1; i <= NF; i++) if ($i == "best") t = $(i + 1) }
	     /^encode \(hs_tokenize\)/ { for (i = 1; i <= NF; i++) if ($i == "best") h = $(i + 1); printf "round %s: hotset / tiktoken %.2fx\n", r, h / t }' "$out.txt"
} >>"$out.txt"
cat "$out.txt"
echo "raw output: $out.txt"
