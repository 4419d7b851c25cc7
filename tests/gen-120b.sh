# Checks `hotset gen --preset gpt-oss-120b` with one layer (1.7 GB) and
# `hotset model` on it: 13,219,200 bytes of weights and 34,560 of biases per
# expert, 50.56 MiB per layer-token, as published for gpt-oss-120b.
. "${top_srcdir:-.}/tests/lib.sh"
case "${HS_SANITIZER_BUILD-}" in yes)
	echo "SKIP: writing 1.7 GB under ASan takes minutes; the normal builds run this test"; exit 77 ;;
esac
avail=$(df -Pk "$TMP" | awk 'NR==2 {print $4}')
if [ "${avail:-0}" -lt 2500000 ]; then
	echo "SKIP: needs 2.5 GB free in $TMP, has $((avail / 1024)) MB"; exit 77
fi
expect_ok "gen 120b" "$HOTSET" gen -q --preset gpt-oss-120b --layers 1 --vocab 512 -o "$TMP/g.gguf" &&
	expect_ok "model 120b" "$HOTSET" model "$TMP/g.gguf" && {
		cat "$TMP/out"
		expect_grep "per expert" '^bytes per expert: 13,219,200 weights \+ 34,560 biases = 13,253,760'
		expect_grep "per layer-token" '^bytes per layer-token \(4 experts\): 53,015,040 \(50\.56 MiB\)$'
		expect_grep "shape" '^n_embd: 2880, expert n_ff: 2880, expert types: mxfp4$'
		expect_grep "experts" '^experts: 128 per layer, 4 used per token$'
	}
finish
